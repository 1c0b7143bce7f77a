//go:build e2e

package main

import (
	"fmt"
	"net/netip"
	"strings"
)

// The node side of every pod's veth holds the pod's gateway: a /32 for
// IPv4, a link-local address for IPv6 (both need no route of their own and
// can be the same on every veth).
const (
	podGateway4 = "169.254.1.1"
	podGateway6 = "fe80::1"
)

// parsePodCIDRs reads --pod-cidr: one range per family, primary first, an
// IPv4 /24 or an IPv6 /64 (the agent numbers pods 2..254 in each).
func parsePodCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	seen := map[bool]bool{}
	for _, f := range strings.Split(s, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		if (p.Addr().Is4() && p.Bits() != 24) || (p.Addr().Is6() && p.Bits() != 64) {
			return nil, fmt.Errorf("%s: want an IPv4 /24 or an IPv6 /64", p)
		}
		if seen[p.Addr().Is4()] {
			return nil, fmt.Errorf("%s: two ranges of one family", s)
		}
		seen[p.Addr().Is4()] = true
		out = append(out, p.Masked())
	}
	return out, nil
}

// podIPs is host number idx in each pod CIDR: a pod's addresses of both
// families end alike, which makes logs easy to read.
func podIPs(cidrs []netip.Prefix, idx int) []netip.Addr {
	var out []netip.Addr
	for _, c := range cidrs {
		if c.Addr().Is4() {
			b := c.Addr().As4()
			b[3] = byte(idx)
			out = append(out, netip.AddrFrom4(b))
			continue
		}
		b := c.Addr().As16()
		b[15] = byte(idx)
		out = append(out, netip.AddrFrom16(b))
	}
	return out
}

// wireSteps are the ip(8) commands that create pod p's namespace and veth
// and route each of its addresses between it and the node. IPv6 addresses
// are added with nodad: nothing else is on the link.
func wireSteps(nodeNetns string, p *pod) [][]string {
	host := fmt.Sprintf("vp%d", p.idx)
	steps := [][]string{
		{"netns", "add", p.netns},
		{"-n", p.netns, "link", "set", "lo", "up"},
		{"-n", nodeNetns, "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", p.netns},
	}
	for _, ip := range p.ips {
		if ip.Is4() {
			steps = append(steps,
				[]string{"-n", nodeNetns, "addr", "add", podGateway4 + "/32", "dev", host},
				[]string{"-n", p.netns, "addr", "add", ip.String() + "/32", "dev", "eth0"},
			)
		} else {
			steps = append(steps,
				[]string{"-n", nodeNetns, "addr", "add", podGateway6 + "/64", "dev", host, "nodad"},
				[]string{"-n", p.netns, "addr", "add", ip.String() + "/128", "dev", "eth0", "nodad"},
			)
		}
	}
	steps = append(steps,
		[]string{"-n", nodeNetns, "link", "set", host, "up"},
		[]string{"-n", p.netns, "link", "set", "eth0", "up"},
	)
	for _, ip := range p.ips {
		if ip.Is4() {
			steps = append(steps,
				[]string{"-n", nodeNetns, "route", "add", ip.String() + "/32", "dev", host, "scope", "link"},
				[]string{"-n", p.netns, "route", "add", podGateway4 + "/32", "dev", "eth0", "scope", "link"},
				[]string{"-n", p.netns, "route", "add", "default", "via", podGateway4, "dev", "eth0"},
			)
		} else {
			steps = append(steps,
				[]string{"-n", nodeNetns, "route", "add", ip.String() + "/128", "dev", host},
				[]string{"-n", p.netns, "-6", "route", "add", "default", "via", podGateway6, "dev", "eth0"},
			)
		}
	}
	return steps
}

// networks are the listen networks of the pod's servers: IPv4 only as
// before in an IPv4 cluster, both families (one socket, IPv4-mapped
// addresses) when the pod has an IPv6 address.
func (p *pod) networks() (tcp, udp string) {
	for _, ip := range p.ips {
		if ip.Is6() {
			return "tcp", "udp"
		}
	}
	return "tcp4", "udp4"
}
