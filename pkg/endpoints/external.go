package endpoints

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// AddrList is a set of addresses in a canonical form (sorted, deduplicated, comma
// separated), so that ServicePort stays comparable with == and "did anything that
// matters change" stays one comparison. Build it with NewAddrList; read it with Addrs.
type AddrList string

// NewAddrList returns the canonical list of addrs.
func NewAddrList(addrs []netip.Addr) AddrList {
	s := slices.Clone(addrs)
	slices.SortFunc(s, netip.Addr.Compare)
	s = slices.Compact(s)
	parts := make([]string, len(s))
	for i, a := range s {
		parts[i] = a.String()
	}
	return AddrList(strings.Join(parts, ","))
}

// Addrs returns the addresses, sorted.
func (l AddrList) Addrs() []netip.Addr {
	if l == "" {
		return nil
	}
	var out []netip.Addr
	for _, s := range strings.Split(string(l), ",") {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// PrefixList is AddrList for prefixes (masked, sorted, deduplicated).
type PrefixList string

// NewPrefixList returns the canonical list of prefixes.
func NewPrefixList(ps []netip.Prefix) PrefixList {
	s := make([]netip.Prefix, len(ps))
	for i, p := range ps {
		s[i] = p.Masked()
	}
	slices.SortFunc(s, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	s = slices.Compact(s)
	parts := make([]string, len(s))
	for i, p := range s {
		parts[i] = p.String()
	}
	return PrefixList(strings.Join(parts, ","))
}

// Prefixes returns the prefixes, sorted.
func (l PrefixList) Prefixes() []netip.Prefix {
	if l == "" {
		return nil
	}
	var out []netip.Prefix
	for _, s := range strings.Split(string(l), ",") {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// external is what a Service gives its ports for traffic from outside the cluster.
type external struct {
	externalIPs, lbIPs AddrList
	sourceRanges       PrefixList
	local              bool   // externalTrafficPolicy: Local (and something external to apply it to)
	healthCheckPort    uint16 // spec.healthCheckNodePort, with local
	hasNodePorts       bool   // type NodePort or LoadBalancer: spec.ports[].nodePort counts
}

// externalOf reads the Service's external addresses of family fam, as kube-proxy's
// newBaseServiceInfo does. Addresses of the other family are skipped silently (the
// other family's proxy serves them); malformed or reserved ones are reported and
// skipped, never programmed: 127.0.0.1 as an external IP would capture the node's
// own localhost port.
func externalOf(svc *v1.Service, fam Family, report func(error)) external {
	var x external
	x.externalIPs = NewAddrList(addrsOf(svc.Spec.ExternalIPs, "spec.externalIPs", fam, report))
	isLB := svc.Spec.Type == v1.ServiceTypeLoadBalancer
	x.hasNodePorts = isLB || svc.Spec.Type == v1.ServiceTypeNodePort
	if isLB {
		var ips []string
		for i, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IP == "" || !isVIPMode(ing, i, fam, report) {
				continue
			}
			ips = append(ips, ing.IP)
		}
		x.lbIPs = NewAddrList(addrsOf(ips, "status.loadBalancer.ingress", fam, report))
		x.sourceRanges = sourceRangesOf(svc.Spec.LoadBalancerSourceRanges, fam, report)
	}
	// Another type's load balancer status (left for a moment after a type change) is
	// not read: its VIPs must not be captured any more.
	reachable := x.hasNodePorts || x.externalIPs != ""
	x.local = reachable && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
	if x.local && isLB {
		if p := svc.Spec.HealthCheckNodePort; p > 0 && p <= 65535 {
			x.healthCheckPort = uint16(p)
		} else {
			report(fmt.Errorf("spec.healthCheckNodePort %d out of range (1..65535): no health check for externalTrafficPolicy Local", p))
		}
	}
	return x
}

// isVIPMode tells whether ingress i's IP is a VIP the node captures, as kube-proxy's
// IsVIPMode: ipMode unset or VIP. With ipMode Proxy the load balancer delivers to
// the node, not to the VIP, and capturing the VIP would bypass it; any other value
// (the API server accepts only these two; a manifest may say anything) is not
// captured either, and is reported once, by the tracker of the IP's family.
func isVIPMode(ing v1.LoadBalancerIngress, i int, fam Family, report func(error)) bool {
	switch {
	case ing.IPMode == nil, *ing.IPMode == v1.LoadBalancerIPModeVIP:
		return true
	case *ing.IPMode == v1.LoadBalancerIPModeProxy:
		return false
	}
	if a, err := parseIP(strings.TrimSpace(ing.IP)); err == nil && fam.matches(a) {
		report(fmt.Errorf("status.loadBalancer.ingress[%d] (%s): ipMode %q is neither VIP nor Proxy: not captured, as kube-proxy does", i, ing.IP, *ing.IPMode))
	}
	return false
}

// addrsOf parses addresses of family fam from field, reporting bad and reserved ones.
func addrsOf(list []string, field string, fam Family, report func(error)) []netip.Addr {
	var out []netip.Addr
	for i, s := range list {
		a, err := parseIP(strings.TrimSpace(s))
		if err != nil {
			report(fmt.Errorf("%s[%d]: %w", field, i, err))
			continue
		}
		if !fam.matches(a) {
			continue
		}
		if why := ReservedReason(a); why != "" {
			report(fmt.Errorf("%s[%d]: %s %s: a node must never capture it; skipped", field, i, a, why))
			continue
		}
		out = append(out, a)
	}
	return out
}

// sourceRangesOf parses loadBalancerSourceRanges of family fam. Validation has
// allowed whitespace around entries; a zero-length prefix allows everyone, the same
// as no list. As kube-proxy reads it, a list with nothing of this family restricts
// nothing for this family.
func sourceRangesOf(list []string, fam Family, report func(error)) PrefixList {
	var out []netip.Prefix
	for i, s := range list {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			report(fmt.Errorf("spec.loadBalancerSourceRanges[%d]: %w", i, err))
			continue
		}
		if !fam.matches(p.Addr()) {
			continue
		}
		if p.Bits() == 0 {
			return ""
		}
		out = append(out, p)
	}
	return NewPrefixList(out)
}
