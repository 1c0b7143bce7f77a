package proxy

import (
	"net/netip"
	"testing"
)

func TestSkeletonFilterAndNodePortChains(t *testing.T) {
	tests := []struct {
		name      string
		o         Options
		na        NodeAddresses
		chains    []string // filter chains present
		nodeports string   // the nodeports chain's rule
		npIPs     int      // nodeport-ips elements
	}{
		{name: "defaults: invalid dropped, all local addresses but 127/8", na: NodeAddresses{All: true},
			chains:    []string{chainFilterForward},
			nodeports: "fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports"},
		{name: "tcp_be_liberal: no invalid drop", o: Options{ConntrackTCPLiberal: true}, na: NodeAddresses{All: true},
			nodeports: "fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports"},
		{name: "localhost NodePorts: localnet guard, 127/8 served", o: Options{LocalhostNodePorts: true}, na: NodeAddresses{All: true},
			chains:    []string{chainFilterForward, chainFilterInput},
			nodeports: "fib daddr type local meta l4proto . th dport vmap @service-nodeports"},
		{name: "--nodeport-addresses: the set, loopback left out without localhost NodePorts",
			na:        NodeAddresses{Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("172.18.0.2")}},
			chains:    []string{chainFilterForward},
			nodeports: "ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports", npIPs: 1},
		{name: "--nodeport-addresses with localhost NodePorts", o: Options{LocalhostNodePorts: true},
			na:        NodeAddresses{Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("172.18.0.2")}},
			chains:    []string{chainFilterForward, chainFilterInput},
			nodeports: "ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports", npIPs: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := SkeletonFor(tc.o, tc.na)
			have := map[string]string{}
			for _, c := range f.Chains {
				rule := ""
				if len(c.Rules) > 0 {
					rule = c.Rules[0].String()
				}
				have[c.Name] = rule
			}
			for _, c := range []string{chainFilterForward, chainFilterInput} {
				_, got := have[c]
				want := false
				for _, w := range tc.chains {
					want = want || w == c
				}
				if got != want {
					t.Errorf("chain %s present = %v, want %v", c, got, want)
				}
			}
			if got := have[chainNodePorts]; got != tc.nodeports {
				t.Errorf("nodeports rule %q, want %q", got, tc.nodeports)
			}
			if len(f.Elements) != tc.npIPs {
				t.Errorf("nodeport-ips elements %v, want %d", f.Elements, tc.npIPs)
			}
		})
	}
}
