package proxy

import (
	"net/netip"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// hinted is e with zone hints for zones and node hints for nodes, as the
// EndpointSlice controller writes them for trafficDistribution.
func hinted(e endpoints.Endpoint, zones, nodes []string) endpoints.Endpoint {
	e.Topology = endpoints.NewTopology("", zones, nodes).WithNode(e.NodeName())
	return e
}

// TestTraceTopology: a Service whose slices carry hints sends this node's traffic to
// the endpoints hinted for its zone (or node), falls back to all of them when none
// is, and Local traffic policies ignore hints, as kube-proxy's CategorizeEndpoints.
func TestTraceTopology(t *testing.T) {
	zones := func(z ...string) []string { return z }
	nodes := zones
	http := port("http", "TCP", 80)
	np := http
	np.NodePort = 30080
	etpLocal := np
	etpLocal.ExternalLocal = true
	itpLocal := http
	itpLocal.InternalLocal = true

	// ep1 on this node (node-a, zone-a), ep2 on node-c in zone-a, ep3 on node-b in zone-b.
	inA1 := hinted(ep(ep1, 8080, true, true, false), zones("zone-a"), nil)
	inA2 := hinted(onNode(ep(ep2, 8080, true, true, false), "node-c"), zones("zone-a"), nil)
	inB := hinted(onNode(ep(ep3, 8080, true, true, false), "node-b"), zones("zone-b"), nil)
	zoned := []endpoints.Endpoint{inA1, inA2, inB}
	here := Options{NodeName: "node-a", Zone: "zone-a", ClusterCIDR: podCIDR}
	elsewhere := Options{NodeName: "node-b", Zone: "zone-b", ClusterCIDR: podCIDR}
	unlabelled := Options{NodeName: "node-a", ClusterCIDR: podCIDR}
	fromPod := nft.Packet{Src: client, Dst: clusterIP, Proto: nft.ProtoTCP, DPort: 80}
	fromOutside := nft.Packet{Src: outsider, Dst: nodeIP, Proto: nft.ProtoTCP, DPort: 30080, NodeAddrs: []netip.Addr{nodeIP}}
	tests := []struct {
		name  string
		opts  Options
		ports []endpoints.ServicePort
		eps   []endpoints.Endpoint
		pkt   nft.Packet
		want  []nft.Outcome
	}{
		{name: "zone hints: this zone's endpoints only", opts: here, ports: []endpoints.ServicePort{http}, eps: zoned,
			pkt: fromPod, want: []nft.Outcome{dnat(ep1, 8080, false), dnat(ep2, 8080, false)}},
		{name: "zone hints: the other zone's node", opts: elsewhere, ports: []endpoints.ServicePort{http}, eps: zoned,
			pkt: fromPod, want: []nft.Outcome{dnat(ep3, 8080, false)}},
		{name: "no endpoint for this zone: all", opts: here, ports: []endpoints.ServicePort{http}, eps: []endpoints.Endpoint{inB},
			pkt: fromPod, want: []nft.Outcome{dnat(ep3, 8080, false)}},
		{name: "this zone's only endpoint is not ready: all ready ones", opts: here, ports: []endpoints.ServicePort{http},
			eps: []endpoints.Endpoint{hinted(ep(ep1, 8080, false, false, false), zones("zone-a"), nil), inB},
			pkt: fromPod, want: []nft.Outcome{dnat(ep3, 8080, false)}},
		{name: "node without a zone label: all", opts: unlabelled, ports: []endpoints.ServicePort{http}, eps: zoned,
			pkt: fromPod, want: []nft.Outcome{dnat(ep1, 8080, false), dnat(ep2, 8080, false), dnat(ep3, 8080, false)}},
		{name: "an endpoint without hints: all", opts: here, ports: []endpoints.ServicePort{http},
			eps: []endpoints.Endpoint{inA1, onNode(ep(ep3, 8080, true, true, false), "node-b")},
			pkt: fromPod, want: []nft.Outcome{dnat(ep1, 8080, false), dnat(ep3, 8080, false)}},
		{name: "node hints: this node's endpoint only", opts: here, ports: []endpoints.ServicePort{http},
			eps: []endpoints.Endpoint{hinted(inA1, zones("zone-a"), nodes("node-a")), hinted(inA2, zones("zone-a"), nodes("node-c")), hinted(inB, zones("zone-b"), nodes("node-b"))},
			pkt: fromPod, want: []nft.Outcome{dnat(ep1, 8080, false)}},
		{name: "node hints, none for this node: its zone", opts: here, ports: []endpoints.ServicePort{http},
			eps: []endpoints.Endpoint{hinted(inA2, zones("zone-a"), nodes("node-c")), hinted(inB, zones("zone-b"), nodes("node-b"))},
			pkt: fromPod, want: []nft.Outcome{dnat(ep2, 8080, false)}},
		{name: "NodePort, externalTrafficPolicy Cluster: hints apply", opts: here, ports: []endpoints.ServicePort{np}, eps: zoned,
			pkt: fromOutside, want: []nft.Outcome{dnat(ep1, 8080, true), dnat(ep2, 8080, true)}},
		// The controller would hint ep1 for zone-a; hinting it elsewhere shows which set each path uses.
		{name: "externalTrafficPolicy Local from outside: this node's endpoints, hints ignored", opts: here, ports: []endpoints.ServicePort{etpLocal},
			eps: []endpoints.Endpoint{hinted(inA1, zones("zone-b"), nil), hinted(inB, zones("zone-a"), nil)},
			pkt: fromOutside, want: []nft.Outcome{dnat(ep1, 8080, false)}},
		{name: "externalTrafficPolicy Local, ClusterIP from a pod: hints apply", opts: here, ports: []endpoints.ServicePort{etpLocal},
			eps: []endpoints.Endpoint{hinted(inA1, zones("zone-b"), nil), hinted(inB, zones("zone-a"), nil)},
			pkt: fromPod, want: []nft.Outcome{dnat(ep3, 8080, false)}},
		{name: "internalTrafficPolicy Local: this node's endpoints, hints ignored", opts: here, ports: []endpoints.ServicePort{itpLocal},
			eps: []endpoints.Endpoint{hinted(inA1, zones("zone-b"), nil), hinted(inB, zones("zone-a"), nil)},
			pkt: fromPod, want: []nft.Outcome{dnat(ep1, 8080, false)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRuleset(tc.opts)
			eps := endpoints.EndpointMap{}
			for _, p := range tc.ports {
				eps[p.Name] = tc.eps
			}
			r.SetFragment("svc", RenderServiceWith(tc.ports, eps, tc.opts))
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

// zonedSlice is svc's slice with pod1 hinted for zone-a and pod3 for zone-b.
func zonedSlice(svc string) *discoveryv1.EndpointSlice {
	s := testSlice(svc, readyEP("pod1"), readyEP("pod3"))
	for i, z := range []string{"zone-a", "zone-b"} {
		s.Endpoints[i].Zone = ptr.To(z)
		s.Endpoints[i].Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: z}}}
	}
	return s
}

// TestSetZoneRerendersEveryService: the node's zone label comes and changes while
// svcproxy runs; every Service is rendered again for it, not only those whose
// objects changed.
func TestSetZoneRerendersEveryService(t *testing.T) {
	k := nft.NewFake()
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	p := New(Config{Tracker: tr, Kernel: k, Options: Options{NodeName: "node-a"}})
	for name, ip := range map[string]string{"web": "10.96.0.10", "api": "10.96.0.11"} {
		tr.OnServiceAdd(testService(name, ip, false, httpPort))
		tr.OnEndpointSliceAdd(zonedSlice(name))
	}
	sync := func() {
		t.Helper()
		if err := p.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(when, want string) {
		t.Helper()
		for _, ip := range []string{"10.96.0.10", "10.96.0.11"} {
			if got := route(t, k, ip); got != want {
				t.Errorf("%s: %s goes to %s, want %s", when, ip, got, want)
			}
		}
	}
	both := "dnat 10.244.1.2:80, dnat 10.244.1.4:80"
	sync()
	expect("no zone label", both)
	p.SetZone("zone-a")
	sync()
	expect("zone-a", "dnat 10.244.1.2:80")
	p.SetZone("zone-b")
	sync()
	expect("zone-b", "dnat 10.244.1.4:80")
	p.SetZone("zone-c")
	sync()
	expect("zone-c, no endpoint there", both)
}
