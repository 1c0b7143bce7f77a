package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShapesApart: a shared run's rows go to tables of their own, labelled, after
// the default shape's (lines without a shape are the default's), and its plots
// get names of their own: a shared-only run writes no default plot.
func TestShapesApart(t *testing.T) {
	ks := []kernelRun{
		{Services: 1000, Shape: "shared", ColdSecs: 2, RSSMiB: 40, ChangeP50: 0.002, ChangeP99: 0.003},
		{Services: 1000, ColdSecs: 1, RSSMiB: 30, ChangeP50: 0.001, ChangeP99: 0.002},
		{Services: 10000, Shape: "disjoint", ColdSecs: 10, RSSMiB: 60, ChangeP50: 0.001, ChangeP99: 0.002},
	}
	ss := []sideRun{{Proxy: svcproxy, Services: 1000, Shape: "shared", ColdSecs: 3, ColdCPU: 1, ChangeP50: 0.01, RSSMiB: 50, HWMMiB: 60}}
	if got := strings.Join(shapes(ks, ss), " "); got != "disjoint shared" {
		t.Fatalf("shapes = %q, want the default first", got)
	}
	for _, tc := range []struct {
		shape    string
		kernel   int // kernel rows
		side     int
		heading  bool
		column   string
		plotName string
	}{
		{"disjoint", 2, 0, false, "| Services x10 eps |", "sync.png"},
		{"shared", 1, 1, true, "| Services, shared shape |", "sync-shared.png"},
	} {
		k := ofShape(ks, tc.shape, func(r kernelRun) string { return r.Shape })
		s := ofShape(ss, tc.shape, func(r sideRun) string { return r.Shape })
		if len(k) != tc.kernel || len(s) != tc.side {
			t.Errorf("%s: %d kernel and %d side runs, want %d and %d", tc.shape, len(k), len(s), tc.kernel, tc.side)
		}
		var b bytes.Buffer
		dir := t.TempDir()
		if err := report(&b, tc.shape, k, s, dir); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if got := strings.Contains(out, "**Shape: shared**"); got != tc.heading {
			t.Errorf("%s: shared heading %v, want %v\n%s", tc.shape, got, tc.heading, out)
		}
		if !strings.Contains(out, tc.column) {
			t.Errorf("%s: no %q column\n%s", tc.shape, tc.column, out)
		}
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if len(names) == 0 || !strings.Contains(strings.Join(names, " "), tc.plotName) {
			t.Errorf("%s: plots %v, want %s among them", tc.shape, names, tc.plotName)
		}
		for _, n := range names {
			if shared := strings.Contains(n, "-shared"); shared != (tc.shape == "shared") {
				t.Errorf("%s: plot %s", tc.shape, n)
			}
		}
	}
	if got := plotFile("d", "rss.png", "shared"); got != filepath.Join("d", "rss-shared.png") {
		t.Errorf("plotFile = %s", got)
	}
}
