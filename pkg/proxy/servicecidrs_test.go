package proxy

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// TestServiceCIDRsBehaviour: with the service CIDRs known, a new connection to an
// address of them that no Service holds is dropped, from a pod (forward) and from
// the node (output), while the Services in the same CIDR keep their behaviour (a
// port with endpoints translated, one without rejected, a wrong port rejected);
// addresses outside the CIDRs and the other family are untouched; without CIDRs
// nothing is dropped.
func TestServiceCIDRsBehaviour(t *testing.T) {
	a := netip.MustParseAddr
	cidrs := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:10:96::/112")}
	served := port("http", "TCP", 80) // clusterIP 10.96.0.10, endpoints ep1, ep2
	empty := port("empty", "TCP", 80)
	empty.ClusterIP = a("10.96.0.11")
	ready := []endpoints.Endpoint{ep(ep1, 8080, true, true, false), ep(ep2, 8080, true, true, false)}
	served6 := endpoints.ServicePort{Name: endpoints.ServicePortName{Namespace: "ns", Name: "six", Protocol: "TCP"},
		ClusterIP: a("fd00:10:96::10"), Port: 80}
	tcp := func(src, dst netip.Addr, dport uint16, local bool) nft.Packet {
		return nft.Packet{Src: src, Dst: dst, Proto: nft.ProtoTCP, DPort: dport, Local: local}
	}
	pod6 := a("fd00:10:244:1::9")
	for _, tc := range []struct {
		name   string
		family endpoints.Family
		cidrs  []netip.Prefix
		pkt    nft.Packet
		want   []nft.Outcome
	}{
		{name: "unallocated address from a pod: dropped", cidrs: cidrs, pkt: tcp(client, a("10.96.200.1"), 80, false),
			want: []nft.Outcome{{Drop: true}}},
		{name: "unallocated address from the node: dropped", cidrs: cidrs, pkt: tcp(outsider, a("10.96.200.1"), 80, true),
			want: []nft.Outcome{{Drop: true}}},
		{name: "unallocated address, UDP: dropped", cidrs: cidrs,
			pkt:  nft.Packet{Src: client, Dst: a("10.96.200.1"), Proto: nft.ProtoUDP, DPort: 53},
			want: []nft.Outcome{{Drop: true}}},
		{name: "Service in the CIDR: translated", cidrs: cidrs, pkt: tcp(client, clusterIP, 80, false),
			want: []nft.Outcome{dnat(ep1, 8080, false), dnat(ep2, 8080, false)}},
		{name: "Service in the CIDR from the node: translated", cidrs: cidrs, pkt: tcp(outsider, clusterIP, 80, true),
			want: []nft.Outcome{dnat(ep1, 8080, false), dnat(ep2, 8080, false)}},
		{name: "Service without endpoints: rejected, not dropped", cidrs: cidrs, pkt: tcp(client, empty.ClusterIP, 80, false),
			want: []nft.Outcome{{Reject: true}}},
		{name: "wrong port of a Service: rejected, not dropped", cidrs: cidrs, pkt: tcp(client, clusterIP, 81, false),
			want: []nft.Outcome{{Reject: true}}},
		{name: "outside the CIDRs: untouched", cidrs: cidrs, pkt: tcp(client, a("10.97.0.1"), 80, false),
			want: []nft.Outcome{{}}},
		{name: "to a node address inside the CIDR: input, untouched", cidrs: cidrs,
			pkt:  nft.Packet{Src: client, Dst: a("10.96.250.1"), Proto: nft.ProtoTCP, DPort: 22, NodeAddrs: []netip.Addr{a("10.96.250.1")}},
			want: []nft.Outcome{{}}},
		{name: "no CIDRs known: untouched", pkt: tcp(client, a("10.96.200.1"), 80, false),
			want: []nft.Outcome{{}}},
		{name: "IPv6 unallocated: dropped in the ip6 table", family: endpoints.IPv6, cidrs: cidrs, pkt: tcp(pod6, a("fd00:10:96::99"), 80, false),
			want: []nft.Outcome{{Drop: true}}},
		{name: "IPv6 Service: translated", family: endpoints.IPv6, cidrs: cidrs, pkt: tcp(pod6, served6.ClusterIP, 80, false),
			want: []nft.Outcome{dnat(a("fd00:10:244:2::5"), 8080, false)}},
		{name: "IPv6 CIDRs only: the ip table drops nothing", cidrs: cidrs[1:], pkt: tcp(client, a("10.96.200.1"), 80, false),
			want: []nft.Outcome{{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Family: tc.family}
			r := NewRuleset(o)
			eps := endpoints.EndpointMap{
				served.Name:  ready,
				served6.Name: {ep(a("fd00:10:244:2::5"), 8080, true, true, false)},
			}
			r.SetFragment("svc", RenderServiceWith([]endpoints.ServicePort{served, empty, served6}, eps, o))
			r.SetFragment(serviceCIDRsOwner, RenderServiceCIDRs(o, tc.cidrs))
			refreshOnDemand(r)
			got, err := nft.Trace(r, tc.pkt, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("outcomes %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRenderServiceCIDRs: the shape of the fragment, which the kernel test and the
// docs rely on: nothing (no hook chain every packet would pass) without CIDRs of
// the family, else one prefix drop per CIDR, jumped to from the filter forward and
// output hooks for new connections only.
func TestRenderServiceCIDRs(t *testing.T) {
	p := netip.MustParsePrefix
	for _, tc := range []struct {
		name   string
		family endpoints.Family
		cidrs  []netip.Prefix
		drops  []string
	}{
		{name: "none"},
		{name: "other family only", cidrs: []netip.Prefix{p("fd00:10:96::/112")}},
		{name: "IPv4", cidrs: []netip.Prefix{p("10.96.0.0/16"), p("fd00:10:96::/112"), p("10.100.0.0/24")},
			drops: []string{"ip daddr 10.96.0.0/16 drop", "ip daddr 10.100.0.0/24 drop"}},
		{name: "IPv6", family: endpoints.IPv6, cidrs: []netip.Prefix{p("10.96.0.0/16"), p("fd00:10:96::/112")},
			drops: []string{"ip6 daddr fd00:10:96::/112 drop"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := RenderServiceCIDRs(Options{Family: tc.family}, tc.cidrs)
			if len(tc.drops) == 0 {
				if len(f.Chains) != 0 || len(f.Elements) != 0 {
					t.Fatalf("fragment %+v, want empty", f)
				}
				return
			}
			chains := map[string]*nft.Chain{}
			for _, c := range f.Chains {
				chains[c.Name] = c
			}
			var drops []string
			for _, r := range chains[chainServiceCIDRs].Rules {
				drops = append(drops, nft.Rule{Stmts: r.Stmts}.String())
			}
			if !slices.Equal(drops, tc.drops) {
				t.Errorf("drops %q, want %q", drops, tc.drops)
			}
			for name, hook := range map[string]string{chainServiceCIDRsFwd: "forward", chainServiceCIDRsOutput: "output"} {
				c := chains[name]
				if c == nil || c.Hook == nil || c.Hook.Type != "filter" || c.Hook.Hook != hook || c.Hook.Priority != 0 {
					t.Fatalf("chain %s: %+v, want a filter %s hook at priority 0", name, c, hook)
				}
				if len(c.Rules) != 1 || c.Rules[0].String() != "ct state new jump "+chainServiceCIDRs {
					t.Errorf("chain %s rules %+v, want only: ct state new jump %s", name, c.Rules, chainServiceCIDRs)
				}
			}
			if len(chains) != 3 {
				t.Errorf("chains %v, want 3", strings.Join(slices.Sorted(maps.Keys(chains)), ", "))
			}
		})
	}
}
