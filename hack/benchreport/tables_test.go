package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestPrintSide(t *testing.T) {
	runs := []sideRun{
		{Proxy: svcproxy, Services: 1000, ColdSecs: 1, ColdCPU: 0.5, ChangeP50: 0.01, RSSMiB: 50, HWMMiB: 80},
		{Proxy: kubeProxyN, Services: 1000, ColdSecs: 2, ColdCPU: 2, ChangeP50: 0.05, RSSMiB: 100, HWMMiB: 100},
		{Proxy: svcproxy, Services: 30000, ColdSecs: 9},
		{Proxy: kubeProxyN, Services: 30000, Skipped: "above E2E_BENCH_KUBEPROXY_MAX=10000"},
	}
	for _, tc := range []struct {
		name string
		want string
	}{
		{"ratios of the same size", "- 1000 Services, svcproxy / kube-proxy: cold sync x0.50 (CPU x0.25), one change p50 x0.20, RSS after cold sync x0.50, peak RSS x0.80"},
		{"no ratio without kube-proxy", "30000 Services, svcproxy / kube-proxy"},
		{"skipped runs are said", "- kube-proxy-nftables at 30000 not run: above E2E_BENCH_KUBEPROXY_MAX=10000"},
		{"a row per run", "| 30000 | svcproxy | 9.00 s"},
	} {
		var b bytes.Buffer
		printSide(&b, defaultShape, runs)
		has := strings.Contains(b.String(), tc.want)
		if wantHas := !strings.HasPrefix(tc.name, "no "); has != wantHas {
			t.Errorf("%s: output has %q: %v, want %v\n%s", tc.name, tc.want, has, wantHas, b.String())
		}
	}
}
