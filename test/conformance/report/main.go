// Command report turns the JUnit reports of make conformance (one directory
// per proxy, each holding e2e.test's junit_*.xml; a later file's result for a
// spec replaces an earlier one's, for a re-run of some specs) into docs/conformance.md: a
// row per selected spec, a column per proxy, the skipped specs with why, and
// the specs that pass on a kube-proxy mode but not on svcproxy.
//
//	go run ./test/conformance/report -reports bin/conformance -o docs/conformance.md
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	reports := flag.String("reports", "bin/conformance", "directory with one subdirectory per proxy")
	out := flag.String("o", "docs/conformance.md", "report to write")
	note := flag.String("note", "", "a paragraph added under the header (how this run differs)")
	flag.Parse()
	runs, err := readRuns(*reports)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	host := fmt.Sprintf("%s %s, %d cores", unix.ByteSliceToString(uts.Sysname[:]), unix.ByteSliceToString(uts.Release[:]), runtime.NumCPU())
	text := render(runs, time.Now().UTC().Format("2006-01-02"), host, *note)
	if err := os.WriteFile(*out, []byte(text), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "report: %s from %s\n", *out, *reports)
}

// readRuns reads each proxy's reports, in the order make conformance runs them.
func readRuns(dir string) ([]run, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var runs []run
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(dir, e.Name(), "junit_*.xml"))
		r := run{proxy: e.Name(), results: map[string]result{}}
		if len(files) == 0 {
			r.missing = "no JUnit report (e2e.test did not finish: see its e2e.log)"
		}
		for _, f := range files {
			if err := r.read(f); err != nil {
				return nil, err
			}
		}
		runs = append(runs, r)
	}
	sortRuns(runs)
	if len(runs) == 0 {
		return nil, fmt.Errorf("no proxy reports in %s", dir)
	}
	return runs, nil
}

// sortRuns puts svcproxy first, then kube-proxy's modes, then anything else.
func sortRuns(runs []run) {
	rank := func(p string) string {
		switch p {
		case "svcproxy":
			return "0"
		case "kube-proxy-iptables":
			return "1"
		case "kube-proxy-nftables":
			return "2"
		}
		return "3" + p
	}
	slices.SortStableFunc(runs, func(a, b run) int { return strings.Compare(rank(a.proxy), rank(b.proxy)) })
}
