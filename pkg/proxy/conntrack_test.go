package proxy

import (
	"errors"
	"maps"
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/svcproxy/svcproxy/pkg/conntrack"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// fakeConntrack holds entries as Service address -> the endpoints flows to it were
// translated to, and reconciles them as the real reconciler does.
type fakeConntrack struct {
	entries map[conntrack.Service][]netip.AddrPort
	calls   int
	last    conntrack.Serving
	// unanswered are TCP SYN entries nobody answered: Service address -> reply
	// sources; families the unanswered reconciles were asked for.
	unanswered map[conntrack.Service][]netip.AddrPort
	families   []uint8
	took       func() // called in each unanswered pass: a test's clock steps
	fail       int    // the next fail Reconciles fail and delete nothing
}

func (f *fakeConntrack) ReconcileUnanswered(family uint8, resolve func([]conntrack.Service) conntrack.Serving) (uint, error) {
	f.families = append(f.families, family)
	if f.took != nil {
		f.took()
	}
	if len(f.unanswered) == 0 {
		return 0, nil
	}
	var keys []conntrack.Service
	for k := range f.unanswered {
		keys = append(keys, k)
	}
	return deleteStale(f.unanswered, resolve(keys)), nil
}

// deleteStale deletes from entries (Service address -> reply sources) those of an
// address serving knows whose reply source it does not list, as the real
// reconciler does, and returns how many.
func deleteStale(entries map[conntrack.Service][]netip.AddrPort, serving conntrack.Serving) uint {
	var deleted uint
	for k, eps := range entries {
		allowed, ok := serving[k]
		if !ok {
			continue
		}
		entries[k] = slices.DeleteFunc(eps, func(e netip.AddrPort) bool {
			gone := !slices.Contains(allowed, e)
			if gone {
				deleted++
			}
			return gone
		})
	}
	return deleted
}

func (f *fakeConntrack) Reconcile(serving conntrack.Serving) (uint, error) {
	f.calls++
	f.last = conntrack.Serving{}
	for k, v := range serving {
		f.last[k] = slices.Clone(v)
	}
	if f.fail > 0 {
		f.fail--
		return 0, errors.New("injected failure")
	}
	return deleteStale(f.entries, serving), nil
}

// lastKeys are the keys of the last Serving passed, sorted.
func (f *fakeConntrack) lastKeys() []conntrack.Service {
	return sortedServices(slices.Collect(maps.Keys(f.last)))
}

// sortedServices sorts keys by address, port and protocol.
func sortedServices(keys []conntrack.Service) []conntrack.Service {
	slices.SortFunc(keys, func(a, b conntrack.Service) int {
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c
		}
		if c := int(a.Port) - int(b.Port); c != 0 {
			return c
		}
		return int(a.Proto) - int(b.Proto)
	})
	return keys
}

var (
	dnsService = conntrack.Service{Proto: nft.ProtoUDP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 53}
	pod1DNS    = netip.MustParseAddrPort("10.244.1.2:53")
	pod2DNS    = netip.MustParseAddrPort("10.244.1.3:53")
)

func newDNS(t *testing.T, k nft.Kernel, ct *fakeConntrack, pods ...string) (*Proxy, *endpoints.Tracker) {
	t.Helper()
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	p := New(Config{Tracker: tr, Kernel: k, Conntrack: ct})
	tr.OnServiceAdd(testService("web", "10.96.0.10", false, httpPort, dnsPort))
	var eps []epSpec
	for _, pod := range pods {
		eps = append(eps, readyEP(pod))
	}
	tr.OnEndpointSliceAdd(testSlice("web", eps...))
	return p, tr
}

func TestConntrackOfARemovedEndpointIsClearedWhenTheFirstAttemptFails(t *testing.T) {
	k := nft.NewFake()
	ct := &fakeConntrack{entries: map[conntrack.Service][]netip.AddrPort{}}
	p, tr := newDNS(t, k, ct, "pod1")
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	ct.entries[dnsService] = []netip.AddrPort{pod1DNS} // a client's flow went to pod1
	tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod3")))
	k.FailNext = 3 // the batch, then each of its owners alone: the Service and the hairpin chain (the new endpoint is in another shard)
	if err := p.Sync(t.Context()); err == nil {
		t.Fatal("sync succeeded although the kernel refused")
	}
	if len(ct.entries[dnsService]) != 1 {
		t.Fatalf("entries of pod1 cleared while the kernel still sends to pod1: %v", ct.entries)
	}
	if err := p.Sync(t.Context()); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if len(ct.entries[dnsService]) != 0 {
		t.Fatalf("after the retry programmed pod3, conntrack still sends the flow to %v", ct.entries[dnsService])
	}
}

func TestConntrackReconcile(t *testing.T) {
	sctpPort := v1.ServicePort{Name: "sctp", Port: 9, Protocol: v1.ProtocolSCTP}
	sctpKey := conntrack.Service{Proto: nft.ProtoSCTP, Addr: dnsService.Addr, Port: 9}
	tests := []struct {
		name      string
		before    map[conntrack.Service][]netip.AddrPort // entries when the test starts
		change    func(tr *endpoints.Tracker, p *Proxy)  // after the first sync
		want      []netip.AddrPort                       // entries towards dnsService at the end
		wantCalls int
		wantKeys  []conntrack.Service // the keys of the last Serving passed (nil: dnsService)
	}{
		{name: "first sync clears entries made while svcproxy was down",
			before: map[conntrack.Service][]netip.AddrPort{dnsService: {pod1DNS, pod2DNS}},
			change: func(*endpoints.Tracker, *Proxy) {}, want: []netip.AddrPort{pod1DNS}, wantCalls: 1},
		{name: "a TCP-only change does not reconcile",
			change: func(tr *endpoints.Tracker, p *Proxy) {
				tr.OnServiceUpdate(nil, testService("web", "10.96.0.10", true, httpPort, dnsPort)) // affinity: TCP rules change
			},
			wantCalls: 1},
		{name: "a resync reconciles even without changes",
			before: map[conntrack.Service][]netip.AddrPort{dnsService: {pod1DNS}},
			change: func(tr *endpoints.Tracker, p *Proxy) { p.RequestResync() }, want: []netip.AddrPort{pod1DNS}, wantCalls: 2},
		{name: "endpoint replaced",
			before: map[conntrack.Service][]netip.AddrPort{dnsService: {pod1DNS}},
			change: func(tr *endpoints.Tracker, p *Proxy) {
				tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod3")))
			},
			want: nil, wantCalls: 2},
		{name: "deleted Service: its address is passed once with no endpoints",
			before: map[conntrack.Service][]netip.AddrPort{dnsService: {pod1DNS}},
			change: func(tr *endpoints.Tracker, p *Proxy) {
				tr.OnServiceDelete(testService("web", "10.96.0.10", false, httpPort, dnsPort))
			},
			want: nil, wantCalls: 2},
		{name: "SCTP ports are served too",
			change: func(tr *endpoints.Tracker, p *Proxy) {
				tr.OnServiceUpdate(nil, testService("web", "10.96.0.10", false, httpPort, dnsPort, sctpPort))
			},
			wantCalls: 2, wantKeys: []conntrack.Service{sctpKey}}, // the UDP port did not change
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ct := &fakeConntrack{entries: map[conntrack.Service][]netip.AddrPort{}}
			for k, v := range tc.before {
				ct.entries[k] = slices.Clone(v)
			}
			k := nft.NewFake()
			p, tr := newDNS(t, k, ct, "pod1")
			if err := p.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			tc.change(tr, p)
			if err := p.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := ct.entries[dnsService]; !slices.Equal(got, tc.want) {
				t.Fatalf("entries towards %v: %v, want %v", dnsService, got, tc.want)
			}
			if ct.calls != tc.wantCalls {
				t.Fatalf("%d reconciles, want %d", ct.calls, tc.wantCalls)
			}
			want := tc.wantKeys
			if want == nil {
				want = []conntrack.Service{dnsService}
			}
			if got := ct.lastKeys(); !slices.Equal(got, sortedServices(want)) {
				t.Fatalf("last Serving %v: keys %v, want %v", ct.last, got, want)
			}
		})
	}
	t.Run("a deleted Service's address is dropped after one reconcile", func(t *testing.T) {
		ct := &fakeConntrack{entries: map[conntrack.Service][]netip.AddrPort{}}
		p, tr := newDNS(t, nft.NewFake(), ct, "pod1")
		if err := p.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		tr.OnServiceDelete(testService("web", "10.96.0.10", false, httpPort, dnsPort))
		if err := p.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if eps, ok := ct.last[dnsService]; !ok || len(eps) != 0 {
			t.Fatalf("the sync that deleted the Service passed %v, want %v with no endpoints", ct.last, dnsService)
		}
		p.RequestResync()
		if err := p.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, ok := ct.last[dnsService]; ok || ct.calls != 3 {
			t.Fatalf("resync after the deletion: %d calls, Serving %v; want 3 calls without %v", ct.calls, ct.last, dnsService)
		}
	})
	t.Run("SCTP key", func(t *testing.T) {
		ct := &fakeConntrack{entries: map[conntrack.Service][]netip.AddrPort{}}
		tr := endpoints.NewTracker(endpoints.TrackerOptions{})
		p := New(Config{Tracker: tr, Kernel: nft.NewFake(), Conntrack: ct})
		tr.OnServiceAdd(testService("web", "10.96.0.10", false, sctpPort))
		if err := p.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if eps, ok := ct.last[sctpKey]; !ok || len(eps) != 0 {
			t.Fatalf("Serving %v, want %v with no endpoints", ct.last, sctpKey)
		}
	})
}

// TestConntrackCoversExternalPaths: a UDP flow that reached a NodePort, an external IP
// or a load balancer IP untranslated while the Service had no endpoints is deleted
// once it has one, so the client's next datagram is translated (kubernetes #139628);
// entries towards other addresses stay.
func TestConntrackCoversExternalPaths(t *testing.T) {
	nodeIP := netip.MustParseAddr("172.18.0.2")
	svc := func(a string, port uint16) conntrack.Service {
		return conntrack.Service{Proto: nft.ProtoUDP, Addr: netip.MustParseAddr(a), Port: port}
	}
	untranslated := func(k conntrack.Service) []netip.AddrPort {
		return []netip.AddrPort{netip.AddrPortFrom(k.Addr, k.Port)}
	}
	nodePort, loNodePort := svc("172.18.0.2", 30053), svc("127.0.0.1", 30053)
	extIP, lbIP := svc("203.0.113.7", 53), svc("192.0.2.10", 53)
	other := svc("172.18.0.9", 30053) // not one of ours
	ct := &fakeConntrack{entries: map[conntrack.Service][]netip.AddrPort{}}
	for _, k := range []conntrack.Service{nodePort, loNodePort, extIP, lbIP, other} {
		ct.entries[k] = untranslated(k)
	}
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	p := New(Config{Tracker: tr, Kernel: nft.NewFake(), Conntrack: ct, Options: Options{LocalhostNodePorts: true},
		SetSysctl: func(string, string) error { return nil }})
	p.SetNodeAddresses([]netip.Addr{nodeIP}, true)
	s := externalService("web", "10.96.0.10", v1.ServiceTypeLoadBalancer, 30052, false)
	s.Spec.ExternalIPs = []string{"203.0.113.7"}
	s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	tr.OnServiceAdd(s)
	if err := p.Sync(t.Context()); err != nil { // no endpoints yet
		t.Fatal(err)
	}
	tr.OnEndpointSliceAdd(testSlice("web", readyEP("pod1")))
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, k := range []conntrack.Service{nodePort, loNodePort, extIP, lbIP} {
		if len(ct.entries[k]) != 0 {
			t.Errorf("untranslated entry towards %v kept: %v", k, ct.entries[k])
		}
		if got := ct.last[k]; !slices.Equal(got, []netip.AddrPort{pod1DNS}) {
			t.Errorf("serving[%v] = %v, want pod1", k, got)
		}
	}
	if len(ct.entries[other]) != 1 {
		t.Errorf("entry towards another address deleted")
	}
}

// TestConntrackReconcilesWhatChanged: a sync hands the reconciler the addresses of
// the Services whose endpoints changed alone (a NodePort on each NodePort address),
// so that its cost follows the change, not the cluster (issue 22); the first sync,
// resyncs, the reconcile after a failed one and after the NodePort addresses changed
// hand it every address.
func TestConntrackReconcilesWhatChanged(t *testing.T) {
	nodeIP, nodeIP2 := netip.MustParseAddr("172.18.0.2"), netip.MustParseAddr("172.18.0.3")
	udp := func(a netip.Addr, port uint16) conntrack.Service {
		return conntrack.Service{Proto: nft.ProtoUDP, Addr: a, Port: port}
	}
	other := udp(netip.MustParseAddr("10.96.0.11"), 53)
	npCluster := udp(netip.MustParseAddr("10.96.0.12"), 53)
	stale := netip.MustParseAddrPort("10.244.9.9:53") // an endpoint no Service has
	ct := &fakeConntrack{entries: map[conntrack.Service][]netip.AddrPort{}}
	p, tr := newDNS(t, nft.NewFake(), ct, "pod1")
	p.SetNodeAddresses([]netip.Addr{nodeIP}, true)
	tr.OnServiceAdd(testService("other", "10.96.0.11", false, httpPort, dnsPort))
	tr.OnEndpointSliceAdd(testSlice("other", readyEP("pod2")))
	tr.OnServiceAdd(externalService("np", "10.96.0.12", v1.ServiceTypeNodePort, 30052, false))
	tr.OnEndpointSliceAdd(testSlice("np", readyEP("pod3")))
	step := func(what string, change func(), want ...conntrack.Service) {
		t.Helper()
		change()
		if err := p.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := ct.lastKeys(); !slices.Equal(got, sortedServices(want)) {
			t.Fatalf("%s: Reconcile handed %v, want %v", what, got, want)
		}
	}
	all := []conntrack.Service{dnsService, other, npCluster, udp(nodeIP, 30053)}
	step("first sync", func() {}, all...)
	step("one Service's endpoints replaced", func() {
		ct.entries[other] = []netip.AddrPort{stale}
		tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod2")))
	}, dnsService)
	if len(ct.entries[other]) != 1 {
		t.Fatalf("an unchanged Service's entries were reconciled on an incremental sync: %v", ct.entries[other])
	}
	step("a NodePort's endpoints replaced", func() {
		tr.OnEndpointSliceUpdate(nil, testSlice("np", readyEP("pod1")))
	}, npCluster, udp(nodeIP, 30053))
	step("resync", p.RequestResync, all...)
	if len(ct.entries[other]) != 0 {
		t.Fatalf("a resync left the stale entry of an unchanged Service: %v", ct.entries[other])
	}
	step("failed reconcile", func() {
		ct.fail = 1
		tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod1")))
	}, dnsService)
	step("after a failed reconcile", func() {}, all...)
	step("nothing changed", func() { ct.last = nil }) // no reconcile
	if ct.last != nil {
		t.Fatalf("a sync that changed nothing reconciled %v", ct.last)
	}
	all2 := []conntrack.Service{dnsService, other, npCluster, udp(nodeIP2, 30053)}
	step("NodePort addresses changed, then one Service", func() {
		p.SetNodeAddresses([]netip.Addr{nodeIP2}, true)
		tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod2")))
	}, all2...)
	step("Service deleted", func() {
		tr.OnServiceDelete(externalService("np", "10.96.0.12", v1.ServiceTypeNodePort, 30052, false))
	}, npCluster, udp(nodeIP2, 30053))
	for _, k := range []conntrack.Service{npCluster, udp(nodeIP2, 30053)} {
		if eps, ok := ct.last[k]; !ok || len(eps) != 0 {
			t.Fatalf("deleted Service: %v handed %v, want no endpoints", k, eps)
		}
	}
}
