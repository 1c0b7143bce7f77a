//go:build e2e

package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The external paths (NodePort, externalIP, LoadBalancer, traffic
// policies) in every family: an IPv4 run reaches them over IPv4, an IPv6
// run over IPv6, and a dual-stack run makes its Services dual-stack and
// reaches each family's addresses in that family, one matrix row per path
// whose cell names each family's outcome.

// extAddrs are the external addresses of one family's scenarios. Nothing
// holds them but proxyLB; the outside routes each through a node
// (routeVia), so only a proxy's rules can answer.
type extAddrs struct {
	extIP, extIPLocal                              string // spec.externalIPs
	lbIP, lbIPRanges, lbIPVIP, lbIPNoNP, lbIPLocal string // ingress IPs
	// proxyLB is held by an external load balancer on the bridge (as
	// cloud-provider-kind's per-Service container is), announced with
	// ipMode: Proxy: nodes must send it there, not capture it.
	proxyLB string
}

// IPv4: externalIPs from TEST-NET-1, ingress IPs from TEST-NET-2. IPv6:
// both from the documentation prefix 2001:db8::/32, the external load
// balancer on the bridge's ULA subnet.
var extAddrsOf = map[corev1.IPFamily]extAddrs{
	corev1.IPv4Protocol: {
		extIP: "192.0.2.10", extIPLocal: "192.0.2.20",
		lbIP: "198.51.100.10", lbIPRanges: "198.51.100.11", lbIPVIP: "198.51.100.12",
		lbIPNoNP: "198.51.100.13", lbIPLocal: "198.51.100.20",
		proxyLB: "172.18.0.250",
	},
	corev1.IPv6Protocol: {
		extIP: "2001:db8:2::10", extIPLocal: "2001:db8:2::20",
		lbIP: "2001:db8:100::10", lbIPRanges: "2001:db8:100::11", lbIPVIP: "2001:db8:100::12",
		lbIPNoNP: "2001:db8:100::13", lbIPLocal: "2001:db8:100::20",
		proxyLB: "fd00:172:18::250",
	},
}

// each returns what pick says of every family of the cluster, primary
// first: the addresses a dual-stack Service's field lists.
func (c *cluster) each(pick func(corev1.IPFamily) string) []string {
	var out []string
	for _, f := range c.family.ipFamilies() {
		out = append(out, pick(f))
	}
	return out
}

func ext(f corev1.IPFamily) extAddrs { return extAddrsOf[f] }

// familyOf is the family of an address (with or without a port) or prefix.
func familyOf(addr string) corev1.IPFamily {
	if p, err := netip.ParsePrefix(addr); err == nil {
		addr = p.Addr().String()
	}
	if isIPv6(addr) {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// nodeIP is n's address of family f.
func nodeIP(n *node, f corev1.IPFamily) string { return ofFamily(n.ips, f) }

// loopback is the node's loopback address of family f.
func loopback(f corev1.IPFamily) string {
	if f == corev1.IPv6Protocol {
		return "::1"
	}
	return "127.0.0.1"
}

// hostCIDR is the one-address prefix of ip (/32 or /128).
func hostCIDR(ip string) string {
	a := netip.MustParseAddr(ip)
	return netip.PrefixFrom(a, a.BitLen()).String()
}

// bothFamilies makes s dual-stack in a dual-stack cluster, so that its
// ClusterIP, NodePort and external addresses are served in each family; in
// a single-stack cluster it stays in the cluster's family.
func (c *cluster) bothFamilies(s *corev1.Service) *corev1.Service {
	if c.family == familyDual {
		s.Spec.IPFamilyPolicy = ref(corev1.IPFamilyPolicyRequireDualStack)
	}
	return s
}

// runFamilyPaths runs the paths build returns for each family of the
// cluster: one subtest per path name, trying the path in every family
// (primary first). In a single-stack cluster the recorded outcome is that
// of its one family; in a dual-stack one it names each ("IPv4: answered
// by x; IPv6: answered by x").
func runFamilyPaths(t *testing.T, build func(f corev1.IPFamily) []path) {
	t.Helper()
	fams := theCluster.family.ipFamilies()
	sets := make([][]path, len(fams))
	for i, f := range fams {
		sets[i] = build(f)
	}
	for i, p := range sets[0] {
		t.Run(p.name, func(t *testing.T) {
			r := track(t)
			var outs []string
			for j, f := range fams {
				out := sets[j][i].try(t)
				if len(fams) > 1 {
					out = fmt.Sprintf("%s: %s", f, out)
				}
				outs = append(outs, out)
			}
			r.metric(t, "outcome", "%s", strings.Join(outs, "; "))
		})
	}
}

// eachFamily runs check once per family of the cluster and records what
// each returned as metric key (prefixed with the family in a dual-stack
// cluster).
func eachFamily(t *testing.T, r *result, key string, check func(f corev1.IPFamily) string) {
	t.Helper()
	fams := theCluster.family.ipFamilies()
	var outs []string
	for _, f := range fams {
		out := check(f)
		if len(fams) > 1 {
			out = fmt.Sprintf("%s: %s", f, out)
		}
		outs = append(outs, out)
	}
	r.metric(t, key, "%s", strings.Join(outs, "; "))
}

// conntrackFamily is conntrack(8)'s -f argument for addr's family: without
// it the tool lists IPv4 entries only.
func conntrackFamily(addr string) []string {
	if isIPv6(addr) {
		return []string{"-f", "ipv6"}
	}
	return nil
}
