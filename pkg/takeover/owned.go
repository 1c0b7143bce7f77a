package takeover

import "strings"

// What kube-proxy creates, by exact name, as read in kubernetes v1.37's
// pkg/proxy/iptables (proxier.go, cleanup.go), pkg/proxy/ipvs (proxier.go, ipset.go)
// and pkg/proxy/nftables; and what kubelet creates (pkg/kubelet/kubelet_network_linux.go),
// which must stay.

// kubeProxyChains are the fixed-name chains of kube-proxy's iptables and ipvs modes
// (in nat, filter or mangle; a name in a table kube-proxy never used is removed too:
// no other program uses these names).
var kubeProxyChains = map[string]bool{
	// iptables mode
	"KUBE-SERVICES":          true,
	"KUBE-EXTERNAL-SERVICES": true,
	"KUBE-NODEPORTS":         true,
	"KUBE-POSTROUTING":       true,
	"KUBE-MARK-MASQ":         true,
	"KUBE-FORWARD":           true,
	"KUBE-PROXY-FIREWALL":    true,
	"KUBE-PROXY-CANARY":      true, // kube-proxy's iptables monitor, in mangle, nat and filter
	// ipvs mode
	"KUBE-NODE-PORT":              true,
	"KUBE-LOAD-BALANCER":          true,
	"KUBE-SOURCE-RANGES-FIREWALL": true,
	"KUBE-IPVS-FILTER":            true,
	"KUBE-IPVS-OUT-FILTER":        true,
	"KUBE-FIRE-WALL":              true, // ipvs mode before KUBE-SOURCE-RANGES-FIREWALL
	// the userspace mode, removed in v1.26, whose chains a long-lived node may still hold
	"KUBE-PORTALS-CONTAINER":  true,
	"KUBE-PORTALS-HOST":       true,
	"KUBE-NODEPORT-CONTAINER": true,
	"KUBE-NODEPORT-HOST":      true,
}

// kubeProxyChainPrefixes are the per-Service and per-endpoint chains of iptables mode
// (a hash follows the prefix); KUBE-XLB- is the local-traffic chain of versions
// before v1.24.
var kubeProxyChainPrefixes = []string{"KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-", "KUBE-SEP-", "KUBE-XLB-"}

// isKubeProxyChain reports whether kube-proxy owns a chain of this name.
// KUBE-FIREWALL is not one: kubelet owns it (kube-proxy writes a copy of kubelet's
// rule into it and never removes it), and so are KUBE-IPTABLES-HINT,
// KUBE-KUBELET-CANARY and KUBE-MARK-DROP (kubelet's before v1.25, still present on
// upgraded nodes and used by other programs).
func isKubeProxyChain(name string) bool {
	if kubeProxyChains[name] {
		return true
	}
	for _, p := range kubeProxyChainPrefixes {
		if strings.HasPrefix(name, p) && len(name) > len(p) {
			return true
		}
	}
	return false
}

// iptablesTables are the iptables-nft tables kube-proxy writes in (ip and ip6).
var iptablesTables = []string{"nat", "filter", "mangle"}

// kubeProxyTable is nftables mode's table, in families ip and ip6.
const kubeProxyTable = "kube-proxy"

// ipvsDevice is the dummy device ipvs mode binds every Service address to.
const ipvsDevice = "kube-ipvs0"

// kubeProxyIPSets are ipvs mode's ipsets; each also exists with the prefix KUBE-6-
// instead of KUBE- for IPv6 (see isKubeProxyIPSet).
var kubeProxyIPSets = map[string]bool{
	"KUBE-LOOP-BACK":                 true,
	"KUBE-CLUSTER-IP":                true,
	"KUBE-EXTERNAL-IP":               true,
	"KUBE-EXTERNAL-IP-LOCAL":         true,
	"KUBE-LOAD-BALANCER":             true,
	"KUBE-LOAD-BALANCER-LOCAL":       true,
	"KUBE-LOAD-BALANCER-FW":          true,
	"KUBE-LOAD-BALANCER-SOURCE-IP":   true,
	"KUBE-LOAD-BALANCER-SOURCE-CIDR": true,
	"KUBE-NODE-PORT-TCP":             true,
	"KUBE-NODE-PORT-LOCAL-TCP":       true,
	"KUBE-NODE-PORT-UDP":             true,
	"KUBE-NODE-PORT-LOCAL-UDP":       true,
	"KUBE-NODE-PORT-SCTP-HASH":       true,
	"KUBE-NODE-PORT-LOCAL-SCTP-HASH": true,
	"KUBE-HEALTH-CHECK-NODE-PORT":    true,
	"KUBE-IPVS-IPS":                  true,
}

// isKubeProxyIPSet reports whether ipvs-mode kube-proxy owns an ipset of this name.
// Other programs name ipsets KUBE-* too (kube-router: KUBE-SRC-..., KUBE-DST-...),
// so only kube-proxy's exact names count.
func isKubeProxyIPSet(name string) bool {
	if rest, ok := strings.CutPrefix(name, "KUBE-6-"); ok {
		name = "KUBE-" + rest
	}
	return kubeProxyIPSets[name]
}
