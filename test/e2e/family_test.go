//go:build e2e

package e2e

import (
	"flag"
	"fmt"
	"net/netip"
	"strings"

	"github.com/svcproxy/svcproxy/internal/controlplane"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// family is the IP family layout of the run's cluster, chosen by E2E_FAMILY:
// ipv4 (the default), dual (IPv4 primary, IPv6 second, as kind's dual
// stack) or ipv6. It decides the Service and pod ranges the control plane
// is given and the addresses of nodes, pods and the outside.
type family string

const (
	familyIPv4 family = "ipv4"
	familyDual family = "dual"
	familyIPv6 family = "ipv6"
)

// The IPv6 half of the address plan: ULA (fd00::/8) ranges mirroring the
// IPv4 ones (kind's defaults where kind has one). Addresses are added with
// nodad: nothing else is on these links, and duplicate address detection
// would keep every address tentative for a second or more.
const (
	kubernetesIPv4   = "10.96.0.1"
	outsideIPv4      = "172.18.0.100"
	outsideOtherIPv4 = "172.18.0.101"
	gatewayIP6       = controlplane.GatewayIP6
	bridgeBits6      = controlplane.BridgeBits6
	serviceCIDR6     = "fd00:10:96::/112"
	clusterCIDR6     = "fd00:10:244::/56"
	kubernetesIP6    = "fd00:10:96::1"
	outsideIP6       = "fd00:172:18::100"
	outsideOtherIP6  = "fd00:172:18::101"
)

func nodeIP6(i int) string  { return fmt.Sprintf("fd00:172:18::%d", i+2) }
func podCIDR6(i int) string { return fmt.Sprintf("fd00:10:244:%d::/64", i) }

func parseFamily(s string) (family, error) {
	switch f := family(s); f {
	case "":
		return familyIPv4, nil
	case familyIPv4, familyDual, familyIPv6:
		return f, nil
	}
	return "", fmt.Errorf("E2E_FAMILY=%q: want ipv4, dual or ipv6", s)
}

func (f family) hasV4() bool { return f != familyIPv6 }
func (f family) hasV6() bool { return f != familyIPv4 }

// pick returns the values of the families the cluster has, primary first.
func (f family) pick(v4, v6 string) []string {
	var out []string
	if f.hasV4() {
		out = append(out, v4)
	}
	if f.hasV6() {
		out = append(out, v6)
	}
	return out
}

func (f family) clusterCIDRs() string { return strings.Join(f.pick(clusterCIDR, clusterCIDR6), ",") }

// ipFamilies are the Kubernetes names of the cluster's families, primary first.
func (f family) ipFamilies() []corev1.IPFamily {
	var out []corev1.IPFamily
	for _, s := range f.pick(string(corev1.IPv4Protocol), string(corev1.IPv6Protocol)) {
		out = append(out, corev1.IPFamily(s))
	}
	return out
}

// The addresses that depend on the family, set once by useFamily before the
// cluster is built (the IPv4 values are the defaults the scenarios were
// written with): the primary family's kubernetes Service address and the
// outside's two client addresses.
var (
	kubernetesIP   = kubernetesIPv4
	outsideIP      = outsideIPv4      // the client's address
	outsideOtherIP = outsideOtherIPv4 // a second client, outside any allowed source range
)

func useFamily(f family) {
	if !f.hasV4() {
		kubernetesIP, outsideIP, outsideOtherIP = kubernetesIP6, outsideIP6, outsideOtherIP6
	}
}

// familyScenarios are the scenarios that run in a dual-stack or IPv6-only
// cluster (when E2E_RUN says nothing): the ClusterIP ones, those written
// for families, and the external paths (NodePort, externalIP,
// LoadBalancer, traffic policies) and topology, which take each family's
// addresses, and the swaps (their Services in the primary family), the
// API server outage, the SCTP NodePort, the Prometheus scrape, the pod
// contract and the EndpointSlice churn (its Services IPv6, in dual stack
// half of each family).
const familyScenarios = "^(TestPodNetwork|TestSeedWalkthrough|TestSessionAffinity|TestHeadlessAndExternalName|" +
	"TestNoEndpointsRefused|TestServiceCIDRDrops|TestKubernetesService|TestUDP|TestProxyRestart|TestProgrammingLatency|" +
	"TestIPFamilyPolicy|TestNodePortIPv6|TestNoEndpointsICMPv6|" +
	"TestNodePort|TestNodePortUDP|TestExternalIP|TestLoadBalancer|" +
	"TestExternalTrafficPolicyLocal|TestExternalTrafficPolicyCluster|" +
	"TestTopologyPreferClose|TestTopologyPreferSameNode|" +
	"TestSwapFromKubeProxyIptables|TestSwapFromKubeProxyNftables|TestSwapBackToKubeProxy|TestSwapBackToKubeProxyWithoutGap|" +
	"TestAPIServerOutage|TestNodePortSCTP|TestPrometheusProgrammingLatency|TestPodContract|" +
	"TestEndpointSliceChurn)$"

// limitToFamilyScenarios selects familyScenarios in a cluster that is not
// IPv4-only, unless the caller chose tests with -test.run.
func limitToFamilyScenarios(f family) {
	run := flag.Lookup("test.run")
	if f == familyIPv4 || run == nil || run.Value.String() != "" {
		return
	}
	_ = run.Value.Set(familyScenarios)
}

// isIPv6 tells an address of either family (with or without a port) apart.
func isIPv6(addr string) bool {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return false
		}
		a = ap.Addr()
	}
	return a.Is6() && !a.Is4In6()
}

// ofFamily returns the first of addrs in family ipf ("" if none).
func ofFamily(addrs []string, ipf corev1.IPFamily) string {
	for _, a := range addrs {
		if isIPv6(a) == (ipf == corev1.IPv6Protocol) {
			return a
		}
	}
	return ""
}

// primaryAddressType is the EndpointSlice address type of the primary
// family: that of a Service that names no family, and of pods' PodIP.
func primaryAddressType() discoveryv1.AddressType {
	if theCluster != nil && !theCluster.family.hasV4() {
		return discoveryv1.AddressTypeIPv6
	}
	return discoveryv1.AddressTypeIPv4
}
