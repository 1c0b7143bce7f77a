package readback

import (
	"sort"
	"strings"
)

// kubeletChains are the iptables chains kubelet creates
// (pkg/kubelet/kubelet_network_linux.go, v1.37): a proxy that takes over
// from kube-proxy must leave them, and the rules in and to them, alone.
// kube-proxy's iptables mode writes an identical KUBE-FIREWALL; it is
// kubelet's all the same.
var kubeletChains = map[string]bool{
	"KUBE-IPTABLES-HINT":  true,
	"KUBE-KUBELET-CANARY": true,
	"KUBE-FIREWALL":       true,
}

// saveLine is one chain declaration or rule of iptables-save output.
type saveLine struct {
	table string
	chain string // declared chain, or the chain a rule is in
	rule  string // "" for a declaration, else the whole "-A ..." line
}

// parseSave reads iptables-save output: declarations without their
// counters, rules as printed.
func parseSave(save string) []saveLine {
	var out []saveLine
	table := ""
	for _, l := range strings.Split(save, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
		case strings.HasPrefix(l, ":"):
			name, _, _ := strings.Cut(l[1:], " ")
			out = append(out, saveLine{table: table, chain: name})
		case strings.HasPrefix(l, "-A "):
			f := strings.Fields(l)
			if len(f) > 1 {
				out = append(out, saveLine{table: table, chain: f[1], rule: l})
			}
		}
	}
	return out
}

// jumpTarget is the chain a rule jumps or goes to, "" if none.
func jumpTarget(rule string) string {
	f := strings.Fields(rule)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "-j" || f[i] == "-g" || f[i] == "--jump" || f[i] == "--goto" {
			return f[i+1]
		}
	}
	return ""
}

func isProxyChain(name string) bool {
	return strings.HasPrefix(name, "KUBE-") && !kubeletChains[name]
}

// KubeProxyIptables lists what kube-proxy's iptables (or ipvs) mode left in
// iptables-save output: every KUBE- chain that is not kubelet's, and every
// rule outside such chains that jumps into one (e.g. PREROUTING's jump to
// KUBE-SERVICES). family ("ip", "ip6") only labels the lines.
func KubeProxyIptables(family, save string) []string {
	var out []string
	for _, l := range parseSave(save) {
		switch {
		case l.rule == "" && isProxyChain(l.chain):
			out = append(out, family+" "+l.table+" chain "+l.chain)
		case l.rule != "" && !isProxyChain(l.chain) && isProxyChain(jumpTarget(l.rule)):
			out = append(out, family+" "+l.table+" rule "+l.rule)
		}
	}
	return out
}

// KubeletIptables lists kubelet's part of iptables-save output, one line
// per declaration ("filter :KUBE-FIREWALL"), rule in its chains and rule
// jumping to them, sorted: what a takeover must leave exactly as it was.
func KubeletIptables(save string) []string {
	var out []string
	for _, l := range parseSave(save) {
		switch {
		case l.rule == "" && kubeletChains[l.chain]:
			out = append(out, l.table+" :"+l.chain)
		case l.rule != "" && (kubeletChains[l.chain] || kubeletChains[jumpTarget(l.rule)]):
			out = append(out, l.table+" "+l.rule)
		}
	}
	sort.Strings(out)
	return out
}

// KubeProxyTables lists the nftables tables of kube-proxy's nftables mode
// in `nft list tables` output.
func KubeProxyTables(listing string) []string {
	var out []string
	for _, l := range strings.Split(listing, "\n") {
		l = strings.TrimSpace(l)
		if l == "table ip kube-proxy" || l == "table ip6 kube-proxy" {
			out = append(out, l)
		}
	}
	return out
}
