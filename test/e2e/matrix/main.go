//go:build e2e

// Command matrix prints the markdown scenario x proxy matrix from the
// results files that the e2e suite writes (E2E_RESULTS), one per proxy.
//
//	go run -tags e2e ./test/e2e/matrix results/*.json
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

type result struct {
	Test    string            `json:"test"`
	Status  string            `json:"status"`
	Seconds float64           `json:"seconds"`
	Metrics map[string]string `json:"metrics"`
}

type run struct {
	Proxy   string    `json:"proxy"`
	Results []*result `json:"results"`
}

var scenarios = []struct{ test, title string }{
	{"TestPodNetwork", "0. Pod network without NAT (harness check); client address through a ClusterIP"},
	{"TestSeedWalkthrough", "1. Seed walk-through (create, scale 3, replace pod, scale 1 cross-node)"},
	{"TestSessionAffinity", "2. ClientIP affinity sticks, off spreads"},
	{"TestHeadlessAndExternalName", "3. Headless / ExternalName get no rules"},
	{"TestNoEndpointsRefused", "4. No endpoints refused fast, then served"},
	{"TestKubernetesService", "5. `kubernetes` Service from a pod"},
	{"TestUDP", "6. UDP round trip, endpoint replaced under a live socket"},
	{"TestProxyRestart", "7. Proxy `kill -9` + restart under load"},
	{"TestProgrammingLatency", "8. Programming latency (EndpointSlice write → first answer)"},
	{"TestSwapFromKubeProxyIptables", "11. Swap kube-proxy (iptables) → svcproxy node by node under load (svcproxy run only)"},
	{"TestSwapFromKubeProxyNftables", "12. Swap kube-proxy (nftables) → svcproxy node by node under load (svcproxy run only)"},
	{"TestSwapBackToKubeProxy", "13. Way back: svcproxy `--cleanup`, kube-proxy (iptables) (svcproxy run only)"},
	{"TestSwapBackToKubeProxyWithoutGap", "14. Way back: kube-proxy (iptables), then `svcproxy --cleanup --takeover=false` (svcproxy run only)"},
	{"TestPodContract", "15. Started as deploy/'s DaemonSet pod (own token, NET_ADMIN only, image binary) (svcproxy run only)"},
}

var order = []string{"svcproxy", "kube-proxy-iptables", "kube-proxy-nftables"}

// cellMetrics lists the numbers shown in a cell, per test.
var cellMetrics = map[string][]struct{ key, label string }{
	"TestPodNetwork":                    {{"clusterip_source", "source %s"}},
	"TestHeadlessAndExternalName":       {{"rules_name_services", "rules name Services: %s"}},
	"TestNoEndpointsRefused":            {{"refused_ms", "refused in %s ms"}},
	"TestUDP":                           {{"udp_recovery_ms", "recovered %s ms after delete"}},
	"TestProxyRestart":                  {{"restart_failed", "%s failed"}, {"restart_healthy_ms", "healthy after %s ms"}, {"restart_changed_failed", "with a change while down: %s failed"}},
	"TestProgrammingLatency":            {{"latency_p50_ms", "p50 %s ms"}, {"latency_max_ms", "max %s ms"}, {"latency_all_ms", "(%s)"}},
	"TestSwapFromKubeProxyIptables":     swapCell,
	"TestSwapFromKubeProxyNftables":     swapCell,
	"TestSwapBackToKubeProxy":           swapCell,
	"TestSwapBackToKubeProxyWithoutGap": swapCell,
	"TestPodContract":                   {{"healthy_after_ms", "healthy after %s ms"}},
}

var swapCell = []struct{ key, label string }{
	{"failed", "%s new connections failed"},
	{"longest_gap_ms", "longest gap %s ms"},
	{"longlived_broken", "long-lived broken %s"},
}

func main() {
	runs := map[string]*run{}
	for _, f := range os.Args[1:] {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			continue
		}
		var r run
		if err := json.Unmarshal(b, &r); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", f, err)
			continue
		}
		runs[r.Proxy] = &r
	}
	fmt.Printf("| Scenario | %s |\n", strings.Join(order, " | "))
	fmt.Printf("|---|%s\n", strings.Repeat("---|", len(order)))
	for _, s := range scenarios {
		cells := []string{s.title}
		for _, p := range order {
			cells = append(cells, cell(runs[p], s.test))
		}
		fmt.Printf("| %s |\n", strings.Join(cells, " | "))
	}
}

func cell(r *run, test string) string {
	if r == nil {
		return "not run"
	}
	for _, res := range r.Results {
		if res.Test == "ClusterUp" {
			return "cluster did not come up"
		}
		if res.Test != test {
			continue
		}
		parts := []string{strings.ToUpper(res.Status)}
		for _, m := range cellMetrics[test] {
			if v, ok := res.Metrics[m.key]; ok {
				parts = append(parts, fmt.Sprintf(m.label, v))
			}
		}
		parts = append(parts, fmt.Sprintf("%.0fs", res.Seconds))
		return strings.Join(parts, ", ")
	}
	return "not run"
}
