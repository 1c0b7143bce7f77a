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
	{"TestServiceCIDRDrops", "4b. Unallocated address of the service CIDR dropped (a leak would be refused by the gateway), a Service without endpoints beside it refused, then a Service on the address served"},
	{"TestKubernetesService", "5. `kubernetes` Service from a pod"},
	{"TestUDP", "6. UDP round trip, endpoint replaced under a live socket"},
	{"TestProxyRestart", "7. Proxy `kill -9` + restart under load"},
	{"TestProgrammingLatency", "8. Programming latency (EndpointSlice write → first answer)"},
	{"TestIPFamilyPolicy", "F1. One Service per ipFamilyPolicy over two dual-stack pods (whole scenario; E2E_FAMILY=dual or ipv6):"},
	{"TestIPFamilyPolicy/SingleStackIPv4", "F1a. SingleStack IPv4: its ClusterIP answered by both endpoints over IPv4"},
	{"TestIPFamilyPolicy/SingleStackIPv6", "F1b. SingleStack IPv6: its ClusterIP answered by both endpoints over IPv6"},
	{"TestIPFamilyPolicy/PreferDualStack", "F1c. PreferDualStack: each ClusterIP answered over its family"},
	{"TestIPFamilyPolicy/RequireDualStack", "F1d. RequireDualStack: each ClusterIP answered over its family"},
	{"TestIPFamilyPolicy/RequireDualStackIPv6First", "F1e. RequireDualStack, ipFamilies [IPv6, IPv4]: each ClusterIP answered over its family"},
	{"TestNodePortIPv6", "F2. NodePort on the nodes' IPv6 addresses, endpoint on worker 2 (whole scenario):"},
	{"TestNodePortIPv6/FromOutside", "F2a. from the outside's IPv6 address, via worker 1"},
	{"TestNodePortIPv6/FromOutsideViaControlPlane", "F2b. from outside over IPv6, via the control-plane node"},
	{"TestNodePortIPv6/FromAnotherNode", "F2c. from worker 2 (the node) to worker 1's IPv6 address"},
	{"TestNodePortIPv6/FromPodToOtherNode", "F2d. from a pod to the other worker's IPv6 address"},
	{"TestNodePortIPv6/IPv4FromOutside", "F2e. (dual stack) the same NodePort on worker 1's IPv4 address"},
	{"TestNoEndpointsICMPv6", "F3. UDP Service without endpoints on its IPv6 ClusterIP: ICMPv6 port unreachable, then served"},
	{"TestNodePort", "16. NodePort (TCP), endpoint on worker 2 (whole scenario), reached:"},
	{"TestNodePort/FromOutside", "16a. from outside the cluster, via worker 1"},
	{"TestNodePort/FromOutsideViaControlPlane", "16b. from outside, via the control-plane node"},
	{"TestNodePort/FromAnotherNode", "16c. from worker 2 (the node) to worker 1"},
	{"TestNodePort/FromPodToOwnNode", "16d. from a pod to its own node's address"},
	{"TestNodePort/FromPodToOtherNode", "16e. from a pod to the other worker's address"},
	{"TestNodePort/FromTheNode", "16f. from the node to its own address"},
	{"TestNodePort/ViaLocalhost", "16g. from the node to 127.0.0.1 (iptables mode answers, nftables mode refuses; svcproxy follows iptables); to ::1 over IPv6 every proxy refuses"},
	{"TestNodePortSCTP", "17s. SCTP NodePort from outside via worker 1 (raw INIT chunks), masqueraded to worker 1"},
	{"TestNodePortUDP", "17. UDP NodePort from outside (whole scenario)"},
	{"TestNodePortUDP/EndpointReplaced", "17a. UDP NodePort from outside, endpoint replaced under a live socket"},
	{"TestNodePortUDP/ZeroToOneEndpoint", "17b. UDP NodePort, client sending since before the Service: 0 → 1 endpoint answered at once"},
	{"TestNodePortUDP/EndpointGoneAndBack", "17c. UDP NodePort 1 → 0 → 1 endpoints under a live socket (svcproxy refuses while none, kube-proxy black-holes)"},
	{"TestNodePortUDP/EndpointReplacedIPv6", "17d. (dual stack) 17a over IPv6, an IPv6 Service of its own"},
	{"TestNodePortUDP/ZeroToOneEndpointIPv6", "17e. (dual stack) 17b over IPv6"},
	{"TestNodePortUDP/EndpointGoneAndBackIPv6", "17f. (dual stack) 17c over IPv6"},
	{"TestExternalIP", "18. externalIP, endpoint on worker 2 (whole scenario)"},
	{"TestExternalIP/FromOutside", "18a. externalIP from outside (routed via worker 1)"},
	{"TestExternalIP/FromPod", "18b. externalIP from a pod"},
	{"TestExternalIP/FromTheNode", "18c. externalIP from the node"},
	{"TestLoadBalancer", "19. LoadBalancer, ingress written as a cloud controller would, endpoint on worker 2 (whole scenario)"},
	{"TestLoadBalancer/Ingress/FromOutside", "19a. LoadBalancer ingress IP from outside"},
	{"TestLoadBalancer/Ingress/FromPod", "19b. LoadBalancer ingress IP from a pod"},
	{"TestLoadBalancer/Ingress/FromTheNode", "19c. LoadBalancer ingress IP from the node"},
	{"TestLoadBalancer/SourceRanges/AllowedSource", "19d. loadBalancerSourceRanges: allowed source answered"},
	{"TestLoadBalancer/SourceRanges/OtherSourceDropped", "19e. loadBalancerSourceRanges: other source dropped"},
	{"TestLoadBalancer/IPModeProxy/VIPCapturedFromTheNode", "19f. ipMode VIP ingress captured by the node"},
	{"TestLoadBalancer/IPModeProxy/ProxyNotCapturedFromTheNode", "19g. ipMode Proxy ingress not captured: the node reaches the external LB"},
	{"TestLoadBalancer/IPModeProxy/ProxyNotCapturedFromPod", "19h. ipMode Proxy ingress not captured: a pod reaches the external LB"},
	{"TestLoadBalancer/NoNodePorts", "19i. allocateLoadBalancerNodePorts: false, ingress IP answered"},
	{"TestExternalTrafficPolicyLocal", "20. externalTrafficPolicy: Local, endpoint on worker 2 (whole scenario)"},
	{"TestExternalTrafficPolicyLocal/SourcePreservedNodePort", "20a. Local: client source preserved through the endpoint node's NodePort"},
	{"TestExternalTrafficPolicyLocal/SourcePreservedLoadBalancer", "20b. Local: client source preserved through the ingress IP"},
	{"TestExternalTrafficPolicyLocal/PodReachesLoadBalancerIP", "20c. Local: pod on a node without endpoint reaches the ingress IP"},
	{"TestExternalTrafficPolicyLocal/PodReachesExternalIP", "20d. Local: pod on a node without endpoint reaches the externalIP (kube-proxy nftables #131765)"},
	{"TestExternalTrafficPolicyLocal/PodReachesNodePort", "20e. Local: pod reaches its own node's NodePort (no local endpoint)"},
	{"TestExternalTrafficPolicyLocal/NodeReachesLoadBalancerIP", "20f. Local: node without endpoint reaches the ingress IP"},
	{"TestExternalTrafficPolicyLocal/NodeWithoutEndpointDropsNodePort", "20g. Local: outside to the NodePort of a node without endpoint: dropped"},
	{"TestExternalTrafficPolicyLocal/NodeWithoutEndpointDropsLoadBalancer", "20h. Local: outside to the ingress IP via a node without endpoint: dropped"},
	{"TestExternalTrafficPolicyLocal/HealthCheckNodePort", "20i. Local: healthCheckNodePort, kube-proxy's JSON: 200 on the endpoint's node, 503 on the others"},
	{"TestExternalTrafficPolicyCluster", "21. externalTrafficPolicy: Cluster, endpoint on worker 2 (whole scenario)"},
	{"TestExternalTrafficPolicyCluster/MasqueradedViaOtherNode", "21a. Cluster: masqueraded via a node without endpoint"},
	{"TestExternalTrafficPolicyCluster/MasqueradedViaEndpointNode", "21b. Cluster: masqueraded via the endpoint's node"},
	{"TestTopologyPreferClose", "22. trafficDistribution PreferClose: each zone's clients reach only their zone's endpoints"},
	{"TestTopologyPreferClose/FallbackWhenZoneHasNone", "22a. PreferClose: zone without endpoints falls back to all"},
	{"TestTopologyPreferSameNode", "23. trafficDistribution PreferSameNode: each node's clients reach only their node's endpoint"},
	{"TestTopologyPreferSameNode/FallbackWhenNodeHasNone", "23a. PreferSameNode: node without endpoint falls back to the zone's"},
	{"TestAPIServerOutage", "9. API server and etcd down 60 s under load: no connection fails, no rule lost, change after it served within 1 s"},
	{"TestPrometheusProgrammingLatency", "9p. Prometheus scrapes every node: p99 programming latency, one series per node and ip_family"},
	{"TestSwapFromKubeProxyIptables", "11. Swap kube-proxy (iptables) → svcproxy node by node under load (svcproxy run only)"},
	{"TestSwapFromKubeProxyNftables", "12. Swap kube-proxy (nftables) → svcproxy node by node under load (svcproxy run only)"},
	{"TestSwapBackToKubeProxy", "13. Way back: svcproxy `--cleanup`, kube-proxy (iptables) (svcproxy run only)"},
	{"TestSwapBackToKubeProxyWithoutGap", "14. Way back: kube-proxy (iptables), then `svcproxy --cleanup --takeover=false` (svcproxy run only)"},
	{"TestPodContract", "15. Started as deploy/'s DaemonSet pod (own token, NET_ADMIN only, image binary) (svcproxy run only)"},
}

var order = []string{"svcproxy", "kube-proxy-iptables", "kube-proxy-nftables"}

// cellMetrics lists the numbers shown in a cell, per test.
var cellMetrics = map[string][]struct{ key, label string }{
	"TestPodNetwork":                                     {{"clusterip_source", "source %s"}},
	"TestHeadlessAndExternalName":                        {{"rules_name_services", "rules name Services: %s"}},
	"TestNoEndpointsRefused":                             {{"refused_ms", "refused in %s ms"}},
	"TestServiceCIDRDrops":                               {{"unallocated_from_pod", "from a pod: %s"}, {"unallocated_from_node", "from the node: %s"}},
	"TestUDP":                                            {{"udp_recovery_ms", "recovered %s ms after delete"}},
	"TestProxyRestart":                                   {{"restart_failed", "%s failed"}, {"restart_healthy_ms", "healthy after %s ms"}, {"restart_changed_failed", "with a change while down: %s failed"}},
	"TestProgrammingLatency":                             {{"latency_p50_ms", "p50 %s ms"}, {"latency_max_ms", "max %s ms"}, {"latency_all_ms", "(%s)"}},
	"TestSwapFromKubeProxyIptables":                      swapCell,
	"TestSwapFromKubeProxyNftables":                      swapCell,
	"TestSwapBackToKubeProxy":                            swapCell,
	"TestSwapBackToKubeProxyWithoutGap":                  swapCell,
	"TestPodContract":                                    {{"healthy_after_ms", "healthy after %s ms"}},
	"TestNodePortSCTP":                                   {{"reached_after_ms", "reached after %s ms"}},
	"TestAPIServerOutage":                                {{"outage_failed", "%s failed"}, {"change_after_outage_ms", "change served after %s ms"}, {"rss_mib_min_max", "RSS MiB %s"}},
	"TestPrometheusProgrammingLatency":                   {{"programming_p99_seconds", "p99 %s s"}},
	"TestNodePortUDP/EndpointReplaced":                   {{"udp_recovery_ms", "recovered %s ms after delete"}},
	"TestNodePortUDP/ZeroToOneEndpoint":                  {{"entries_before", "%s conntrack entries before"}, {"answered_after_ready_ms", "answered %s ms after the endpoint was ready"}},
	"TestNodePortUDP/EndpointGoneAndBack":                {{"while_none", "%s while none"}, {"first_refused_after_ms", "first refusal %s ms after empty"}, {"answered_after_ready_ms", "answered %s ms after the new endpoint was ready"}},
	"TestNodePortUDP/EndpointReplacedIPv6":               {{"udp_recovery_ms", "recovered %s ms after delete"}},
	"TestNodePortUDP/ZeroToOneEndpointIPv6":              {{"entries_before", "%s conntrack entries before"}, {"answered_after_ready_ms", "answered %s ms after the endpoint was ready"}},
	"TestNodePortUDP/EndpointGoneAndBackIPv6":            {{"while_none", "%s while none"}, {"first_refused_after_ms", "first refusal %s ms after empty"}, {"answered_after_ready_ms", "answered %s ms after the new endpoint was ready"}},
	"TestExternalTrafficPolicyLocal/HealthCheckNodePort": {{"hc_w2", "endpoint node %s"}, {"hc_w1", "worker 1 %s"}, {"hc_cp", "control plane %s"}},
	"TestNoEndpointsICMPv6":                              {{"refused_ms", "refused in %s ms"}},
	"TestTopologyPreferClose":                            topologyCell("zone_a_client", "zone_b_client"),
	"TestTopologyPreferClose/FallbackWhenZoneHasNone":    topologyCell("zone_a_client"),
	"TestTopologyPreferSameNode":                         topologyCell("w1_client", "w2_client"),
	"TestTopologyPreferSameNode/FallbackWhenNodeHasNone": topologyCell("w1_client"),
	"TestIPFamilyPolicy/SingleStackIPv4":                 familyCell,
	"TestIPFamilyPolicy/SingleStackIPv6":                 familyCell,
	"TestIPFamilyPolicy/PreferDualStack":                 familyCell,
	"TestIPFamilyPolicy/RequireDualStack":                familyCell,
	"TestIPFamilyPolicy/RequireDualStackIPv6First":       familyCell,
}

// External-traffic paths (TestNodePort/..., TestLoadBalancer/..., ...)
// show what happened: answered by whom, refused, dropped, or the peer
// address the endpoint saw.
func metricsOf(test string) []struct{ key, label string } {
	if m, ok := cellMetrics[test]; ok {
		return m
	}
	return []struct{ key, label string }{{"outcome", "%s"}, {"peer", "endpoint saw %s"}}
}

var familyCell = []struct{ key, label string }{
	{"cluster_ips", "ClusterIPs %s"},
	{"sources", "source %s"},
}

// topologyCell shows who answered each named client (a dual-stack run
// records one count per ClusterIP family, key_ipv4 and key_ipv6).
func topologyCell(clients ...string) []struct{ key, label string } {
	var out []struct{ key, label string }
	for _, c := range clients {
		for _, suffix := range []string{"", "_ipv4", "_ipv6"} {
			out = append(out, struct{ key, label string }{c + suffix, strings.ReplaceAll(c, "_", " ") + strings.ReplaceAll(suffix, "_", " ") + " %s"})
		}
	}
	return out
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
		for _, m := range metricsOf(test) {
			if v, ok := res.Metrics[m.key]; ok {
				parts = append(parts, fmt.Sprintf(m.label, v))
			}
		}
		parts = append(parts, fmt.Sprintf("%.0fs", res.Seconds))
		return strings.Join(parts, ", ")
	}
	return "not run"
}
