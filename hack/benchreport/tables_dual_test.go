package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDualRows(t *testing.T) {
	runs := []kernelRun{
		{Services: 1000, ColdSecs: 1},
		{Services: 10000, ColdSecs: 10},
		{Services: 30000, ColdSecs: 30},
		{Services: 10000, ColdSecs: 25, dualFields: dualFields{Family: "dual", Cold4Secs: 20, Cold6Secs: 25,
			DualChangeP50: 0.03, DualChangeP99: 0.05, Checked: 64, CheckSecs: 0.2,
			Resync4Secs: 6, Resync6Secs: 60, Read4Secs: 5, Read6Secs: 50}, ChangeP50: 0.02, ChangeP99: 0.04, Samples: 50},
	}
	var kernel, dual bytes.Buffer
	printKernel(&kernel, defaultShape, runs)
	printDual(&dual, runs)
	rows := strings.Split(kernel.String(), "\n")
	var order []string
	for _, r := range rows {
		if f := strings.Split(r, "|"); len(f) > 2 && strings.HasPrefix(f[2], " ") && strings.Contains(f[2], " s (") {
			order = append(order, strings.TrimSpace(f[1]))
		}
	}
	if got, want := strings.Join(order, ", "), "1000, 10000, 10000 dual-stack, 30000"; got != want {
		t.Errorf("kernel table rows %q, want %q (the dual row next to its size's IPv4 one)\n%s", got, want, kernel.String())
	}
	for _, want := range []string{
		"| 10000 | 25.00 s (IPv4 20.00 s, IPv6 25.00 s) | 20.0 ms / 40.0 ms (50) | 30.0 ms / 50.0 ms (50) | 6.00 s / 60.00 s | 5.00 s / 50.00 s | 64 Services x 2 ClusterIPs in 0.20 s |",
	} {
		if !strings.Contains(dual.String(), want) {
			t.Errorf("dual table lacks %q:\n%s", want, dual.String())
		}
	}
	var none bytes.Buffer
	printDual(&none, runs[:3])
	if none.Len() != 0 {
		t.Errorf("a dual table without dual runs:\n%s", none.String())
	}
	if got := singleStack(runs); len(got) != 3 {
		t.Errorf("singleStack kept %d runs, want the 3 IPv4 ones (the plots' curves)", len(got))
	}
}

// hack/bench's dual line decodes into the embedded dualFields.
func TestDualLineDecodes(t *testing.T) {
	var r kernelRun
	if err := json.Unmarshal([]byte(`{"family":"dual","services":10000,"cold_sync_ipv6_s":2.5,"dataplane_checked_services":64}`), &r); err != nil {
		t.Fatal(err)
	}
	if !r.dual() || r.Services != 10000 || r.Cold6Secs != 2.5 || r.Checked != 64 {
		t.Errorf("decoded %+v", r)
	}
}

// BENCH_FAMILY=dual make bench: only dual lines, nothing for the curves; the
// report prints its tables and draws no empty plot (gonum panics on one).
func TestRunDualOnly(t *testing.T) {
	dir := t.TempDir()
	kernel := filepath.Join(dir, "kernel.jsonl")
	if err := os.WriteFile(kernel, []byte(`{"family":"dual","services":300,"cold_sync_s":0.5,"rss_mib":40,"endpoint_change_p50_s":0.01,"endpoint_change_p99_s":0.02}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(kernel, "", filepath.Join(dir, "plots")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "plots", "sync.png")); !os.IsNotExist(err) {
		t.Errorf("a plot without points was written (stat: %v)", err)
	}
}
