// Package nodeaddr decides which of this node's addresses serve NodePorts
// (--nodeport-addresses / nodePortAddresses) and keeps that choice current as
// interface addresses come and go.
//
// The choice itself (Select) is a pure function of the configured list, the node's
// primary IPs and the local interface addresses; Watcher feeds it from netlink.
package nodeaddr

import (
	"fmt"
	"net/netip"
	"strings"
)

// Keywords kube-proxy v1.37 accepts in nodePortAddresses besides CIDRs.
const (
	// KeywordPrimary is the node's primary IPv4 and/or IPv6 address (from its Node
	// object, or --bind-address).
	KeywordPrimary = "primary"
	// KeywordLocalhost is 127.0.0.0/8 and ::1/128.
	KeywordLocalhost = "localhost"
	// KeywordAll is 0.0.0.0/0 and ::/0.
	KeywordAll = "all"
)

// Spec is a parsed nodePortAddresses list: CIDRs and keywords, in any combination.
type Spec struct {
	Prefixes  []netip.Prefix
	Primary   bool
	Localhost bool
	All       bool
}

// Parse reads a nodePortAddresses list. An empty list means `all`, kube-proxy's
// default in iptables mode, whose behaviour svcproxy follows.
func Parse(entries []string) (Spec, error) {
	var s Spec
	if len(entries) == 0 {
		s.All = true
		return s, nil
	}
	for i, e := range entries {
		switch strings.TrimSpace(e) {
		case KeywordPrimary:
			s.Primary = true
		case KeywordLocalhost:
			s.Localhost = true
		case KeywordAll:
			s.All = true
		default:
			p, err := netip.ParsePrefix(strings.TrimSpace(e))
			if err != nil {
				return Spec{}, fmt.Errorf("nodePortAddresses[%d] %q: not a CIDR nor one of %q, %q, %q", i, e, KeywordPrimary, KeywordLocalhost, KeywordAll)
			}
			s.Prefixes = append(s.Prefixes, p.Masked())
		}
	}
	return s, nil
}

// String gives the list back in its configured form, for logs.
func (s Spec) String() string {
	var parts []string
	if s.All {
		parts = append(parts, KeywordAll)
	}
	if s.Primary {
		parts = append(parts, KeywordPrimary)
	}
	if s.Localhost {
		parts = append(parts, KeywordLocalhost)
	}
	for _, p := range s.Prefixes {
		parts = append(parts, p.String())
	}
	return "[" + strings.Join(parts, " ") + "]"
}
