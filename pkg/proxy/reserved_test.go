package proxy

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// TestReservedClusterIPCapturesNothing: a Service whose ClusterIP is 127.0.0.1 would
// take every connection to the node's localhost port 80, and reject every other
// localhost TCP port (svcproxy's own health port 10256 included). It is refused with a
// reason, and the node's localhost stays untouched.
func TestReservedClusterIPCapturesNothing(t *testing.T) {
	var invalid []string
	tr := endpoints.NewTracker(endpoints.TrackerOptions{OnInvalid: func(kind, ns, name, reason string) {
		invalid = append(invalid, kind+" "+ns+"/"+name+": "+reason)
	}})
	tr.OnServiceAdd(testService("loopback", "127.0.0.1", false, httpPort))
	tr.OnEndpointSliceAdd(testSlice("loopback", readyEP("pod1")))
	tr.OnServiceAdd(testService("metadata", "169.254.169.254", false, httpPort))
	tr.OnServiceAdd(testService("web", "10.96.0.10", false, httpPort))
	snap, _, _ := tr.Take()
	r := RenderAll(snap, Options{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")})

	localhost := netip.MustParseAddr("127.0.0.1")
	for _, pkt := range []nft.Packet{
		{Src: localhost, Dst: localhost, Proto: nft.ProtoTCP, DPort: 80, Local: true},
		{Src: localhost, Dst: localhost, Proto: nft.ProtoTCP, DPort: 10256, Local: true},
		{Src: localhost, Dst: localhost, Proto: nft.ProtoUDP, DPort: 53, Local: true},
		{Src: client, Dst: localhost, Proto: nft.ProtoTCP, DPort: 80},
		{Src: client, Dst: netip.MustParseAddr("169.254.169.254"), Proto: nft.ProtoTCP, DPort: 80},
	} {
		got, err := nft.Trace(r, pkt, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0] != (nft.Outcome{}) {
			t.Errorf("%v -> %v:%d/%d: %v, want untouched (accept)", pkt.Src, pkt.Dst, pkt.DPort, pkt.Proto, got)
		}
	}
	if len(invalid) != 2 || !strings.Contains(invalid[0], "ns/loopback") || !strings.Contains(invalid[0], "loopback (127.0.0.0/8") ||
		!strings.Contains(invalid[1], "ns/metadata") || !strings.Contains(invalid[1], "link-local") {
		t.Errorf("reports: %q, want the loopback and link-local ClusterIPs refused with a reason", invalid)
	}
	// The valid Service is unaffected.
	got, err := nft.Trace(r, nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 80}, nil)
	if err != nil || len(got) != 1 || !got[0].Reject {
		t.Fatalf("web (no endpoints): %v %v, want reject", got, err)
	}
}

// TestRenderSkipsReservedAddresses: render refuses reserved addresses on its own too,
// whatever built the snapshot.
func TestRenderSkipsReservedAddresses(t *testing.T) {
	lo := port("http", "TCP", 80)
	lo.ClusterIP = netip.MustParseAddr("127.0.0.1")
	f := RenderService([]endpoints.ServicePort{lo}, endpoints.EndpointMap{lo.Name: {ep(ep1, 80, true, true, false)}}, "node-a")
	if len(f.Chains) != 0 || len(f.Elements) != 0 || len(f.Shared) != 0 {
		t.Fatalf("loopback ClusterIP rendered: %+v", f)
	}

	web := port("http", "TCP", 80)
	eps := endpoints.EndpointMap{web.Name: {
		ep(netip.MustParseAddr("127.0.0.1"), 80, true, true, false),
		ep(netip.MustParseAddr("224.0.0.1"), 80, true, true, false),
		ep(ep1, 8080, true, true, false),
	}}
	rs := NewRuleset(Options{})
	rs.SetFragment("svc", RenderService([]endpoints.ServicePort{web}, eps, "node-a"))
	refreshOnDemand(rs)
	got, err := nft.Trace(rs, nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 80}, nil)
	if err != nil || len(got) != 1 || got[0] != dnat(ep1, 8080, false) {
		t.Fatalf("%v %v, want only dnat to %v", got, err, ep1)
	}
}
