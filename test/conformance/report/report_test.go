package main

import (
	"strings"
	"testing"
)

func TestRenderFromJUnit(t *testing.T) {
	runs, err := readRuns("testdata")
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].proxy != "svcproxy" || runs[1].proxy != "kube-proxy-iptables" {
		t.Fatalf("runs %v, want svcproxy then kube-proxy-iptables", runs)
	}
	text := render(runs, "2026-12-02", "Linux, 2 cores", "A note.")
	for _, want := range []string{
		"| svcproxy | 1 | 1 | 1 |",
		"\nA note.\n",
		"| kube-proxy-iptables | 3 | 0 | 0 |",
		"| Services should serve a basic endpoint from pods [Conformance] | PASS 12s | PASS 10s |",
		"| Services should implement service.kubernetes.io/headless | FAIL 61s | PASS 30s |",
		"| Services should work after restarting kube-proxy [Disruptive] | SKIP | PASS 40s |",
		"with svcproxy: Skipped because component:kube-proxy is not running as pod.",
		"with svcproxy: [FAILED] service not reachable",
		"- [sig-network] Services should implement service.kubernetes.io/headless: FAIL with svcproxy, PASS with kube-proxy-iptables",
		"- [sig-network] Services should work after restarting kube-proxy [Disruptive]: SKIP with svcproxy, PASS with kube-proxy-iptables",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	for _, absent := range []string{"sig-storage", "SynchronizedBeforeSuite", "restarting apiserver [Disruptive] |"} {
		if strings.Contains(text, absent) {
			t.Errorf("report lists %q (not run or not a spec):\n%s", absent, text)
		}
	}
}
