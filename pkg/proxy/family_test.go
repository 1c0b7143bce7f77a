package proxy

import (
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/manifests"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// dualStackSnapshot is testdata/dual-stack as a tracker of family f sees it.
func dualStackSnapshot(t *testing.T, f endpoints.Family) endpoints.Snapshot {
	t.Helper()
	objs, err := manifests.Load(os.DirFS("testdata"), "dual-stack")
	if err != nil {
		t.Fatal(err)
	}
	tr := endpoints.NewTracker(endpoints.TrackerOptions{Family: f})
	for _, s := range objs.Services {
		tr.OnServiceAdd(s)
	}
	for _, s := range objs.EndpointSlices {
		tr.OnEndpointSliceAdd(s)
	}
	snap, _, _ := tr.Take()
	return snap
}

// dualStackOptions are one node's options per family, as a dual-stack node runs them.
func dualStackOptions(f endpoints.Family) Options {
	o := Options{Family: f, NodeName: "worker", ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")}
	if f == endpoints.IPv6 {
		o.ClusterCIDR = netip.MustParsePrefix("fd00:10:244::/56")
	}
	return o
}

// TestRenderFamilyGolden renders the dual-stack example once per family: the ip6
// table holds the IPv6 ClusterIPs with their IPv6 endpoints only, the ip table the
// IPv4 ones, each in its own family's types and fields. Regenerate with
// go test ./pkg/proxy -run TestRenderFamilyGolden -update.
func TestRenderFamilyGolden(t *testing.T) {
	for _, tc := range []struct {
		family endpoints.Family
		golden string
	}{
		{endpoints.IPv4, "testdata/dual-stack-ipv4.nft"},
		{endpoints.IPv6, "testdata/dual-stack-ipv6.nft"},
	} {
		t.Run(tc.family.String(), func(t *testing.T) {
			got := RenderAll(dualStackSnapshot(t, tc.family), dualStackOptions(tc.family)).Text()
			if *update {
				if err := os.WriteFile(tc.golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(tc.golden)
			if err != nil {
				t.Fatalf("%v (run go test ./pkg/proxy -run TestRenderFamilyGolden -update to create it)", err)
			}
			if got != string(want) {
				t.Fatalf("render differs from %s:\n%s", tc.golden, got)
			}
		})
	}
}

// TestTraceBehaviourPerFamily follows new connections through each family's table
// of the dual-stack example.
func TestTraceBehaviourPerFamily(t *testing.T) {
	a := netip.MustParseAddr
	node6, node4 := a("fd00:172:18::2"), a("172.18.0.2")
	to := func(addr string, port uint16, masq bool) nft.Outcome {
		return nft.Outcome{DNAT: netip.AddrPortFrom(a(addr), port), Masquerade: masq}
	}
	tests := []struct {
		name   string
		family endpoints.Family
		pkt    nft.Packet
		want   []nft.Outcome
	}{
		{name: "IPv6 ClusterIP: IPv6 endpoints", family: endpoints.IPv6,
			pkt:  nft.Packet{Src: a("fd00:10:244:3::9"), Dst: a("fd00:10:96::10"), Proto: nft.ProtoTCP, DPort: 80},
			want: []nft.Outcome{to("fd00:10:244:1::2", 80, false), to("fd00:10:244:1::3", 80, false)}},
		{name: "IPv6 from outside the cluster CIDR: masqueraded", family: endpoints.IPv6,
			pkt:  nft.Packet{Src: a("2001:db8::1"), Dst: a("fd00:10:96::10"), Proto: nft.ProtoTCP, DPort: 80},
			want: []nft.Outcome{to("fd00:10:244:1::2", 80, true), to("fd00:10:244:1::3", 80, true)}},
		{name: "IPv6 hairpin: masqueraded", family: endpoints.IPv6,
			pkt:  nft.Packet{Src: a("fd00:10:244:1::2"), Dst: a("fd00:10:96::10"), Proto: nft.ProtoTCP, DPort: 80},
			want: []nft.Outcome{to("fd00:10:244:1::2", 80, true), to("fd00:10:244:1::3", 80, false)}},
		{name: "IPv6 wrong TCP port: reset", family: endpoints.IPv6,
			pkt:  nft.Packet{Src: a("fd00:10:244:3::9"), Dst: a("fd00:10:96::10"), Proto: nft.ProtoTCP, DPort: 81},
			want: []nft.Outcome{{Reject: true}}},
		{name: "IPv6 wrong UDP port: ICMPv6 reject", family: endpoints.IPv6,
			pkt:  nft.Packet{Src: a("fd00:10:244:3::9"), Dst: a("fd00:10:96::10"), Proto: nft.ProtoUDP, DPort: 80},
			want: []nft.Outcome{{Reject: true}}},
		{name: "IPv6 ping to a ClusterIP: dropped", family: endpoints.IPv6,
			pkt:  nft.Packet{Src: a("fd00:10:244:3::9"), Dst: a("fd00:10:96::10"), Proto: nft.ProtoICMPv6},
			want: []nft.Outcome{{Drop: true}}},
		{name: "IPv6 sticky UDP DNS: every IPv6 endpoint", family: endpoints.IPv6,
			pkt:  nft.Packet{Src: a("fd00:10:244:3::9"), Dst: a("fd00:10:96::53"), Proto: nft.ProtoUDP, DPort: 53},
			want: []nft.Outcome{to("fd00:10:244:2::5", 53, false), to("fd00:10:244:2::6", 53, false)}},
		{name: "IPv6-only Service", family: endpoints.IPv6,
			pkt:  nft.Packet{Src: a("fd00:10:244:3::9"), Dst: a("fd00:10:96::30"), Proto: nft.ProtoTCP, DPort: 8080},
			want: []nft.Outcome{to("fd00:10:244:1::8", 8080, false)}},
		{name: "IPv6 NodePort, Local policy: local endpoint, source kept", family: endpoints.IPv6,
			pkt:  nft.Packet{Src: a("2001:db8::1"), Dst: node6, Proto: nft.ProtoTCP, DPort: 30080, NodeAddrs: []netip.Addr{node6}},
			want: []nft.Outcome{to("fd00:10:244:1::7", 80, false)}},
		{name: "IPv6 external IP, Local policy", family: endpoints.IPv6,
			pkt:  nft.Packet{Src: a("2001:db8::1"), Dst: a("fd00:203::7"), Proto: nft.ProtoTCP, DPort: 80},
			want: []nft.Outcome{to("fd00:10:244:1::7", 80, false)}},
		{name: "IPv6 NodePort from a pod: every endpoint", family: endpoints.IPv6,
			pkt:  nft.Packet{Src: a("fd00:10:244:3::9"), Dst: node6, Proto: nft.ProtoTCP, DPort: 30080, NodeAddrs: []netip.Addr{node6}},
			want: []nft.Outcome{to("fd00:10:244:1::7", 80, false), to("fd00:10:244:2::7", 80, false)}},
		{name: "no NodePorts on ::1", family: endpoints.IPv6,
			pkt:  nft.Packet{Src: a("::1"), Dst: a("::1"), Proto: nft.ProtoTCP, DPort: 30080, Local: true, NodeAddrs: []netip.Addr{node6}},
			want: []nft.Outcome{{}}},
		{name: "an IPv4 packet passes the ip6 table untouched", family: endpoints.IPv6,
			pkt:  nft.Packet{Src: a("10.244.3.9"), Dst: a("10.96.0.10"), Proto: nft.ProtoTCP, DPort: 80},
			want: []nft.Outcome{{}}},
		{name: "IPv4 ClusterIP: IPv4 endpoints", family: endpoints.IPv4,
			pkt:  nft.Packet{Src: a("10.244.3.9"), Dst: a("10.96.0.10"), Proto: nft.ProtoTCP, DPort: 80},
			want: []nft.Outcome{to("10.244.1.2", 80, false), to("10.244.1.3", 80, false)}},
		{name: "IPv4 NodePort, Local policy", family: endpoints.IPv4,
			pkt:  nft.Packet{Src: a("192.0.2.1"), Dst: node4, Proto: nft.ProtoTCP, DPort: 30080, NodeAddrs: []netip.Addr{node4}},
			want: []nft.Outcome{to("10.244.1.7", 80, false)}},
		{name: "the IPv6-only Service is not in the ip table", family: endpoints.IPv4,
			pkt:  nft.Packet{Src: a("fd00:10:244:3::9"), Dst: a("fd00:10:96::30"), Proto: nft.ProtoTCP, DPort: 8080},
			want: []nft.Outcome{{}}},
	}
	rulesets := map[endpoints.Family]*nft.Ruleset{}
	for _, f := range []endpoints.Family{endpoints.IPv4, endpoints.IPv6} {
		rulesets[f] = RenderAll(dualStackSnapshot(t, f), dualStackOptions(f))
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := nft.Trace(rulesets[tc.family], tc.pkt, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("outcomes %v, want %v", got, tc.want)
			}
		})
	}
}

// TestShardOfBothFamilies: the shard is the address's last byte modulo 16 in both
// families, so an IPv6 address never panics (As4 would).
func TestShardOfBothFamilies(t *testing.T) {
	for addr, want := range map[string]int{"10.96.0.17": 1, "fd00:10:96::11": 1, "fd00::ff": 15, "10.96.0.0": 0} {
		if got := shardOf(netip.MustParseAddr(addr)); got != want {
			t.Errorf("shardOf(%s) = %d, want %d", addr, got, want)
		}
	}
}
