// Command benchreport turns make bench's JSON lines into the markdown tables of
// docs/bench.md and its PNG plots: cold sync time and RSS against the number of
// Services, svcproxy next to kube-proxy.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	kernel := flag.String("kernel", "", "hack/bench's JSON lines (svcproxy against the kernel, in process)")
	side := flag.String("side", "", "TestBenchSideBySide's JSON lines (through the apiserver, traffic decides)")
	plots := flag.String("plots", "", "directory to write the PNG plots to (none if empty)")
	flag.Parse()
	if err := run(*kernel, *side, *plots); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(kernelFile, sideFile, plotDir string) error {
	var ks []kernelRun
	if err := readLines(kernelFile, &ks); err != nil {
		return err
	}
	var ss []sideRun
	if err := readLines(sideFile, &ss); err != nil {
		return err
	}
	for _, shape := range shapes(ks, ss) {
		k := ofShape(ks, shape, func(r kernelRun) string { return r.Shape })
		s := ofShape(ss, shape, func(r sideRun) string { return r.Shape })
		if err := report(os.Stdout, shape, k, s, plotDir); err != nil {
			return err
		}
	}
	return nil
}

// report prints one shape's tables and draws its plots.
func report(w io.Writer, shape string, ks []kernelRun, ss []sideRun, plotDir string) error {
	printShapeHeading(w, shape)
	printKernel(w, shape, ks)
	printDual(w, ks)
	printChurn(w, ks)
	printDataplane(w, ks)
	printSide(w, shape, ss)
	curves := singleStack(ks)
	if plotDir == "" || len(curves)+len(ss) == 0 {
		return nil // nothing to draw: a plot without points cannot be drawn on a log scale
	}
	if err := os.MkdirAll(plotDir, 0o755); err != nil {
		return err
	}
	for name, p := range map[string]func(string, string, []kernelRun, []sideRun) error{
		"sync.png":   plotSync,
		"rss.png":    plotRSS,
		"change.png": plotChange,
	} {
		if err := p(plotFile(plotDir, name, shape), shape, curves, ss); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// readLines decodes one JSON value per line of file into *out (a slice); an empty
// file name or a missing file reads nothing.
func readLines[T any](file string, out *[]T) error {
	if file == "" {
		return nil
	}
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		*out = append(*out, v)
	}
	return sc.Err()
}
