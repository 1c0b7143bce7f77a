package proxy

import (
	"flag"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/deploy"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/manifests"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

var update = flag.Bool("update", false, "rewrite golden files")

// seedSnapshot renders the embedded seed example through the real tracker.
func seedSnapshot(t *testing.T) endpoints.Snapshot {
	t.Helper()
	objs, err := manifests.Load(deploy.Examples, "examples")
	if err != nil {
		t.Fatal(err)
	}
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	for _, s := range objs.Services {
		tr.OnServiceAdd(s)
	}
	for _, s := range objs.EndpointSlices {
		tr.OnEndpointSliceAdd(s)
	}
	snap, _, _ := tr.Take()
	return snap
}

func TestRenderSeedGolden(t *testing.T) {
	got := RenderAll(seedSnapshot(t), Options{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")}).Text()
	const golden = "testdata/my-nginx.nft"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/proxy -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("render differs from %s:\n%s", golden, got)
	}
}

var (
	clusterIP = netip.MustParseAddr("10.96.0.10")
	ep1       = netip.MustParseAddr("10.244.1.2")
	ep2       = netip.MustParseAddr("10.244.1.3")
	ep3       = netip.MustParseAddr("10.244.2.2")
	client    = netip.MustParseAddr("10.244.2.9")
	outsider  = netip.MustParseAddr("172.18.0.1")
)

func port(name string, proto string, p uint16) endpoints.ServicePort {
	return endpoints.ServicePort{Name: endpoints.ServicePortName{Namespace: "ns", Name: "web", Port: name, Protocol: proto}, ClusterIP: clusterIP, Port: p}
}

func ep(a netip.Addr, p uint16, ready, serving, terminating bool) endpoints.Endpoint {
	return endpoints.Endpoint{Port: p, Ready: ready, Serving: serving, Terminating: terminating}.WithAddr(a).OnNode("node-a")
}

func onNode(e endpoints.Endpoint, node string) endpoints.Endpoint {
	return e.OnNode(node)
}

func dnat(a netip.Addr, p uint16, masq bool) nft.Outcome {
	return nft.Outcome{DNAT: netip.AddrPortFrom(a, p), Masquerade: masq}
}

func TestTraceBehaviour(t *testing.T) {
	http := port("http", "TCP", 80)
	dns := port("dns", "UDP", 53)
	sticky := http
	sticky.SessionAffinity, sticky.AffinityTimeout = true, 10*time.Second
	local := http
	local.InternalLocal = true
	ready := []endpoints.Endpoint{ep(ep1, 8080, true, true, false), ep(ep2, 8080, true, true, false)}
	tests := []struct {
		name  string
		opts  Options
		ports []endpoints.ServicePort
		eps   []endpoints.Endpoint
		pkt   nft.Packet
		// affinity is the affinity map's content, before the sweeper runs.
		affinity []nft.Element
		want     []nft.Outcome
	}{
		{name: "random over ready endpoints", ports: []endpoints.ServicePort{http}, eps: ready,
			pkt:  nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 80},
			want: []nft.Outcome{dnat(ep1, 8080, false), dnat(ep2, 8080, false)}},
		{name: "from the node itself", ports: []endpoints.ServicePort{http}, eps: ready,
			pkt:  nft.Packet{Src: outsider, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 80, Local: true},
			want: []nft.Outcome{dnat(ep1, 8080, false), dnat(ep2, 8080, false)}},
		{name: "terminating endpoint gets no new connections", ports: []endpoints.ServicePort{http},
			eps:  []endpoints.Endpoint{ep(ep1, 8080, true, true, false), ep(ep2, 8080, false, true, true)},
			pkt:  nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 80},
			want: []nft.Outcome{dnat(ep1, 8080, false)}},
		{name: "no ready: fall back to serving terminating", ports: []endpoints.ServicePort{http},
			eps:  []endpoints.Endpoint{ep(ep1, 8080, false, false, true), ep(ep2, 8080, false, true, true)},
			pkt:  nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 80},
			want: []nft.Outcome{dnat(ep2, 8080, false)}},
		{name: "no endpoints: reject", ports: []endpoints.ServicePort{http},
			pkt:  nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 80},
			want: []nft.Outcome{{Reject: true}}},
		{name: "wrong port: reject", ports: []endpoints.ServicePort{http}, eps: ready,
			pkt:  nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 81},
			want: []nft.Outcome{{Reject: true}}},
		{name: "wrong protocol: reject", ports: []endpoints.ServicePort{http}, eps: ready,
			pkt:  nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoUDP, DPort: 80},
			want: []nft.Outcome{{Reject: true}}},
		{name: "ping: dropped", ports: []endpoints.ServicePort{http}, eps: ready,
			pkt:  nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoICMP},
			want: []nft.Outcome{{Drop: true}}},
		{name: "not a service: untouched", ports: []endpoints.ServicePort{http}, eps: ready,
			pkt:  nft.Packet{Src: client, Dst: ep1, Proto: nft.ProtoTCP, DPort: 8080},
			want: []nft.Outcome{{}}},
		{name: "UDP port", ports: []endpoints.ServicePort{dns}, eps: []endpoints.Endpoint{ep(ep3, 53, true, true, false)},
			pkt:  nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoUDP, DPort: 53},
			want: []nft.Outcome{dnat(ep3, 53, false)}},
		{name: "hairpin is masqueraded", ports: []endpoints.ServicePort{http}, eps: ready,
			pkt:  nft.Packet{Src: ep1, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 80},
			want: []nft.Outcome{dnat(ep1, 8080, true), dnat(ep2, 8080, false)}},
		{name: "outside cluster CIDR is masqueraded", opts: Options{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")},
			ports: []endpoints.ServicePort{http}, eps: ready,
			pkt:  nft.Packet{Src: outsider, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 80},
			want: []nft.Outcome{dnat(ep1, 8080, true), dnat(ep2, 8080, true)}},
		{name: "inside cluster CIDR is not", opts: Options{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")},
			ports: []endpoints.ServicePort{http}, eps: ready,
			pkt:  nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 80},
			want: []nft.Outcome{dnat(ep1, 8080, false), dnat(ep2, 8080, false)}},
		{name: "masquerade-all", opts: Options{MasqueradeAll: true}, ports: []endpoints.ServicePort{http}, eps: ready,
			pkt:  nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 80},
			want: []nft.Outcome{dnat(ep1, 8080, true), dnat(ep2, 8080, true)}},
		{name: "internalTrafficPolicy Local: only this node's endpoints", ports: []endpoints.ServicePort{local},
			eps:  []endpoints.Endpoint{ep(ep1, 8080, true, true, false), onNode(ep(ep2, 8080, true, true, false), "node-b")},
			pkt:  nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 80},
			want: []nft.Outcome{dnat(ep1, 8080, false)}},
		{name: "internalTrafficPolicy Local: local terminating beats remote ready", ports: []endpoints.ServicePort{local},
			eps:  []endpoints.Endpoint{ep(ep1, 8080, false, true, true), onNode(ep(ep2, 8080, true, true, false), "node-b")},
			pkt:  nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 80},
			want: []nft.Outcome{dnat(ep1, 8080, false)}},
		{name: "internalTrafficPolicy Local: endpoints only elsewhere are dropped", ports: []endpoints.ServicePort{local},
			eps:  []endpoints.Endpoint{onNode(ep(ep2, 8080, true, true, false), "node-b")},
			pkt:  nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 80},
			want: []nft.Outcome{{Drop: true}}},
		{name: "internalTrafficPolicy Local: no endpoints at all are rejected", ports: []endpoints.ServicePort{local},
			pkt:  nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 80},
			want: []nft.Outcome{{Reject: true}}},
		{name: "ClientIP affinity: new client spreads", ports: []endpoints.ServicePort{sticky}, eps: ready,
			pkt:  nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 80},
			want: []nft.Outcome{dnat(ep1, 8080, false), dnat(ep2, 8080, false)}},
		{name: "ClientIP affinity: known client sticks", ports: []endpoints.ServicePort{sticky}, eps: ready,
			pkt: nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 80},
			affinity: []nft.Element{{Set: affinityMap(clusterIP), Key: []nft.Datum{nft.IP(client), nft.IP(clusterIP), nft.Proto(nft.ProtoTCP), nft.Port(80)},
				Data: []nft.Datum{nft.IP(ep2), nft.Port(8080)}}},
			want: []nft.Outcome{dnat(ep2, 8080, false)}},
		{name: "ClientIP affinity: entry for a removed endpoint is ignored", ports: []endpoints.ServicePort{sticky}, eps: ready[:1],
			pkt: nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 80},
			affinity: []nft.Element{{Set: affinityMap(clusterIP), Key: []nft.Datum{nft.IP(client), nft.IP(clusterIP), nft.Proto(nft.ProtoTCP), nft.Port(80)},
				Data: []nft.Datum{nft.IP(ep2), nft.Port(8080)}}},
			want: []nft.Outcome{dnat(ep1, 8080, false)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRuleset(tc.opts)
			eps := endpoints.EndpointMap{}
			for _, p := range tc.ports {
				eps[p.Name] = tc.eps
			}
			f := RenderService(tc.ports, eps, "node-a")
			r.SetFragment("svc", f)
			refreshOnDemand(r)
			got, err := nft.Trace(r, tc.pkt, swept(tc.affinity, stickyOf(f)))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("outcomes %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRenderSkipsWhatTheKernelWouldRefuse(t *testing.T) {
	bad := []endpoints.ServicePort{
		port("x", "ICMP", 80),
		{Name: endpoints.ServicePortName{Namespace: "ns", Name: "v6", Protocol: "TCP"}, ClusterIP: netip.MustParseAddr("fd00::1"), Port: 80},
		port("zero", "TCP", 0),
	}
	f := RenderService(bad, endpoints.EndpointMap{}, "node-a")
	if len(f.Chains) != 0 || len(f.Elements) != 0 {
		t.Fatalf("invalid ports rendered: %+v", f)
	}
}

// swept is the affinity map as the tracer reads it, once the sweeper has deleted
// what it deletes.
func swept(entries []nft.Element, live stickyPorts) nft.Affinity {
	stale := map[string]bool{}
	for _, e := range staleAffinity(entries, live) {
		stale[e.ID()] = true
	}
	a := nft.Affinity{}
	for _, e := range entries {
		if !stale[e.ID()] {
			a[e.ID()] = e.Data
		}
	}
	return a
}

// TestHairpinOnlyForThisNodesEndpoints: the hairpin set holds the endpoints that may
// be pods of this node (here, or of no known node), so it grows with the node's
// share of the cluster, not with the cluster.
func TestHairpinOnlyForThisNodesEndpoints(t *testing.T) {
	here, elsewhere, unknown := netip.MustParseAddr("10.244.1.1"), netip.MustParseAddr("10.244.2.2"), netip.MustParseAddr("10.244.3.3")
	eps := endpoints.EndpointMap{port("http", "TCP", 80).Name: {
		ep(here, 8080, true, true, false),
		onNode(ep(elsewhere, 8080, true, true, false), "node-b"),
		onNode(ep(unknown, 8080, true, true, false), ""),
	}}
	for _, tc := range []struct {
		node string
		want []netip.Addr
	}{
		{"node-a", []netip.Addr{here, unknown}},
		{"node-b", []netip.Addr{elsewhere, unknown}},
		{"", []netip.Addr{here, elsewhere, unknown}}, // a proxy not told its node
	} {
		f := RenderService([]endpoints.ServicePort{port("http", "TCP", 80)}, eps, tc.node)
		var got []netip.Addr
		for _, e := range f.Elements {
			if strings.HasPrefix(e.Set, setHairpin+"-") {
				a, _ := netip.AddrFromSlice(e.Key[0].Bytes())
				got = append(got, a)
			}
		}
		slices.SortFunc(got, netip.Addr.Compare)
		if !slices.Equal(got, tc.want) {
			t.Errorf("node %q: hairpin elements for %v, want %v", tc.node, got, tc.want)
		}
		// Every endpoint still gets traffic: only the hairpin set is per node.
		if n := countSet(f, mapEndpoints+"-"); n != 3 {
			t.Errorf("node %q: %d endpoint elements, want 3", tc.node, n)
		}
	}
}

func countSet(f nft.Fragment, prefix string) int {
	n := 0
	for _, e := range f.Elements {
		if strings.HasPrefix(e.Set, prefix) {
			n++
		}
	}
	return n
}

func TestProgrammable(t *testing.T) {
	ip := func(s string) endpoints.Endpoint { return ep(netip.MustParseAddr(s), 80, true, true, false) }
	good1, good2, good3 := ip("10.244.1.2"), ip("10.244.1.3"), ip("10.244.1.4")
	v6, loopback := ip("fd00::2"), ip("127.0.0.1")
	noPort := good3
	noPort.Port = 0
	for _, tc := range []struct {
		name     string
		in, want []endpoints.Endpoint
		same     bool // the input itself, not a copy
	}{
		{"all programmable: the list itself", []endpoints.Endpoint{good1, good2, good3}, []endpoints.Endpoint{good1, good2, good3}, true},
		{"another family", []endpoints.Endpoint{good1, v6, good2}, []endpoints.Endpoint{good1, good2}, false},
		{"the first reserved", []endpoints.Endpoint{loopback, good1}, []endpoints.Endpoint{good1}, false},
		{"no port, last", []endpoints.Endpoint{good1, good2, noPort}, []endpoints.Endpoint{good1, good2}, false},
		{"none", []endpoints.Endpoint{loopback}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			got := programmable(tc.in, netip.MustParseAddr("10.96.0.10"))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("programmable = %v, want %v", got, tc.want)
			}
			if same := len(got) > 0 && &got[0] == &tc.in[0]; same != tc.same {
				t.Fatalf("the input itself: %v, want %v", same, tc.same)
			}
			if !slices.Equal(tc.in, in) {
				t.Fatalf("the input changed: %v, was %v", tc.in, in)
			}
		})
	}
}
