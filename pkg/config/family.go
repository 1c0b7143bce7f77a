package config

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

// CheckFamilies is kube-proxy's checkBadConfig and checkBadIPConfig once
// the families are known: settings that name only the wrong IP family. They
// are warnings, except --cluster-cidr of the wrong family alone on a
// single-stack node, which kube-proxy has always refused to start with.
func CheckFamilies(primary endpoints.Family, dualStack bool, clusterCIDR string, nodePortAddresses []string, healthzAddr, metricsAddr string) (warnings []string, fatal error) {
	other := primary.Other()
	clusterType := primary.String() + "-only"
	if dualStack {
		clusterType = primary.String() + "-primary"
	}

	byFamily, keywords := cidrsByFamily(nodePortAddresses)
	anyDual := isDualStack(splitNonEmpty(clusterCIDR)) || byFamily[endpoints.IPv4] > 0 && byFamily[endpoints.IPv6] > 0
	switch {
	case len(nodePortAddresses) == 0:
		warnings = append(warnings, "nodePortAddresses is unset; NodePort connections will be accepted on all local IPs. Consider using `--nodeport-addresses primary`")
	case keywords:
		// primary, localhost and all name both families: nothing to say.
	case anyDual && byFamily[primary] == len(nodePortAddresses):
		warnings = append(warnings, fmt.Sprintf("cluster appears to be dual-stack but nodePortAddresses contains only %s addresses; NodePort connections will be accepted on all local %s IPs", primary, other))
	case byFamily[primary] == 0:
		warnings = append(warnings, fmt.Sprintf("cluster appears to be %s-primary but nodePortAddresses contains only %s addresses; NodePort connections will be accepted on all local %s IPs", primary, other, primary))
	}

	if cidrs := splitNonEmpty(clusterCIDR); len(cidrs) > 0 {
		if n, _ := cidrsByFamily(cidrs); n[other] == len(cidrs) {
			msg := fmt.Sprintf("cluster is %s but clusterCIDRs contains only %s addresses", clusterType, other)
			if !dualStack {
				return warnings, fmt.Errorf("%s", msg)
			}
			warnings = append(warnings, msg)
		}
	}
	if !dualStack {
		for _, b := range []struct{ name, addr string }{{"healthzBindAddress", healthzAddr}, {"metricsBindAddress", metricsAddr}} {
			if host, _, err := net.SplitHostPort(b.addr); err == nil {
				if a, err := netip.ParseAddr(host); err == nil && endpoints.FamilyOf(a) == other {
					warnings = append(warnings, fmt.Sprintf("cluster is %s but %s is %s", clusterType, b.name, other))
				}
			}
		}
	}
	return warnings, nil
}

// cidrsByFamily counts the CIDRs of each family in list and says whether it
// holds keywords (or anything else that is not a CIDR).
func cidrsByFamily(list []string) (map[endpoints.Family]int, bool) {
	n := map[endpoints.Family]int{}
	other := false
	for _, s := range list {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			other = true
			continue
		}
		n[endpoints.FamilyOf(p.Addr())]++
	}
	return n, other
}

func isDualStack(list []string) bool {
	n, _ := cidrsByFamily(list)
	return n[endpoints.IPv4] > 0 && n[endpoints.IPv6] > 0
}

func splitNonEmpty(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ClusterCIDRFor is the entry of family f in a (possibly dual-stack) clusterCIDR,
// the pod range outside which f's proxy masquerades Service traffic.
func ClusterCIDRFor(clusterCIDR string, f endpoints.Family) netip.Prefix {
	for _, c := range strings.Split(clusterCIDR, ",") {
		if p, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil && endpoints.FamilyOf(p.Addr()) == f {
			return p
		}
	}
	return netip.Prefix{}
}
