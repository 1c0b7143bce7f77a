package proxy

import (
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// TestSameClusterIPOlderServiceWinsAndHandsOver: two Services claim 10.96.0.10. The
// older one is served whatever order the events came in, its endpoint map is not
// mixed with the other's, and when it is deleted the other takes over in the same
// sync, in a transaction the kernel accepts.
func TestSameClusterIPOlderServiceWinsAndHandsOver(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old := testService("old", "10.96.0.10", false, httpPort)
	old.CreationTimestamp = metav1.NewTime(t0)
	young := testService("young", "10.96.0.10", false, httpPort)
	young.CreationTimestamp = metav1.NewTime(t0.Add(time.Hour))
	// The old Service has two endpoints, the young one one: a mixed map would show
	// the young one's pod in slot 0 with the old one's dispatch.
	oldSlice, youngSlice := testSlice("old", readyEP("pod1"), readyEP("pod2")), testSlice("young", readyEP("pod3"))

	for _, order := range []string{"old first", "young first"} {
		t.Run(order, func(t *testing.T) {
			k := nft.NewFake()
			var conflicts []endpoints.ConflictChange
			tr := endpoints.NewTracker(endpoints.TrackerOptions{OnConflict: func(c endpoints.ConflictChange) { conflicts = append(conflicts, c) }})
			p := New(Config{Tracker: tr, Kernel: k})
			if order == "old first" {
				tr.OnServiceAdd(old)
				tr.OnServiceAdd(young)
			} else {
				tr.OnServiceAdd(young)
				tr.OnServiceAdd(old)
			}
			tr.OnEndpointSliceAdd(oldSlice)
			tr.OnEndpointSliceAdd(youngSlice)
			if err := p.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := route(t, k, "10.96.0.10"); got != "dnat 10.244.1.2:80, dnat 10.244.1.3:80" {
				t.Fatalf("served %q, want the older Service's endpoints only", got)
			}
			if len(conflicts) != 1 || conflicts[0].Service.Key != (endpoints.ServiceKey{Namespace: "ns", Name: "young"}) ||
				conflicts[0].Winner != (endpoints.ServiceKey{Namespace: "ns", Name: "old"}) || conflicts[0].Active != 1 {
				t.Fatalf("conflicts reported: %+v, want one: ns/young loses to ns/old", conflicts)
			}

			// A resync of both objects reports nothing new.
			tr.OnServiceUpdate(old, old)
			tr.OnServiceUpdate(young, young)
			if err := p.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			if len(conflicts) != 1 {
				t.Fatalf("conflict reported again on resync: %+v", conflicts)
			}

			applied := k.Applied()
			tr.OnServiceDelete(old)
			if err := p.Sync(t.Context()); err != nil {
				t.Fatalf("sync after deleting the winner: %v", err)
			}
			if n := k.Applied() - applied; n != 1 {
				t.Fatalf("hand-over took %d transactions, want one", n)
			}
			if got := route(t, k, "10.96.0.10"); got != "dnat 10.244.1.4:80" {
				t.Fatalf("after the winner's deletion served %q, want the other Service's pod", got)
			}
			if len(conflicts) != 2 || !conflicts[1].Resolved || conflicts[1].Active != 0 {
				t.Fatalf("resolution not reported: %+v", conflicts)
			}
			tr.OnServiceDelete(young)
			if err := p.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := route(t, k, "10.96.0.10"); got != "accept" {
				t.Fatalf("after both are gone: %q", got)
			}
		})
	}
}

// TestSameClusterIPDeletingTheLoserLeavesTheWinner: the loser's deletion changes
// nothing the winner serves.
func TestSameClusterIPDeletingTheLoserLeavesTheWinner(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Same creation time: namespace/name order decides ("a" < "b").
	a := testService("a", "10.96.0.10", false, httpPort)
	b := testService("b", "10.96.0.10", false, httpPort)
	a.CreationTimestamp, b.CreationTimestamp = metav1.NewTime(t0), metav1.NewTime(t0)
	k := nft.NewFake()
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	p := New(Config{Tracker: tr, Kernel: k})
	tr.OnServiceAdd(b)
	tr.OnEndpointSliceAdd(testSlice("b", readyEP("pod3")))
	tr.OnServiceAdd(a)
	tr.OnEndpointSliceAdd(testSlice("a", readyEP("pod1"), readyEP("pod2")))
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	tr.OnServiceDelete(b)
	if err := p.Sync(t.Context()); err != nil {
		t.Fatalf("sync after deleting the loser: %v", err)
	}
	if got := route(t, k, "10.96.0.10"); got != "dnat 10.244.1.2:80, dnat 10.244.1.3:80" {
		t.Fatalf("after the loser's deletion served %q", got)
	}
}

// TestExternalIPOnAnotherClusterIPIsRefused: Service attacker lists good's ClusterIP
// (10.96.0.10, port 80) as an externalIP, with its own endpoint. Whichever came
// first, and whoever is older, new connections to 10.96.0.10:80 from a pod and from
// the node go to good's endpoint only (its endpoint map holds no other); the
// attacker keeps its own ClusterIP; when good is deleted the attacker's claim takes
// effect in that sync, without a resync.
func TestExternalIPOnAnotherClusterIPIsRefused(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	good := testService("good", "10.96.0.10", false, httpPort)
	good.CreationTimestamp = metav1.NewTime(t0.Add(time.Hour))
	attacker := testService("attacker", "10.96.0.99", false, httpPort)
	attacker.CreationTimestamp = metav1.NewTime(t0) // older: the ClusterIP's owner wins all the same
	attacker.Spec.ExternalIPs = []string{"10.96.0.10"}

	for _, order := range []string{"attacker after good", "attacker before good"} {
		t.Run(order, func(t *testing.T) {
			k := nft.NewFake()
			var conflicts []endpoints.ConflictChange
			tr := endpoints.NewTracker(endpoints.TrackerOptions{OnConflict: func(c endpoints.ConflictChange) { conflicts = append(conflicts, c) }})
			p := New(Config{Tracker: tr, Kernel: k})
			sync := func() {
				t.Helper()
				if err := p.Sync(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			addAttacker := func() {
				tr.OnServiceAdd(attacker)
				tr.OnEndpointSliceAdd(testSlice("attacker", readyEP("pod3")))
			}
			if order == "attacker before good" {
				addAttacker()
				sync()
				if got := route(t, k, "10.96.0.10"); got != "dnat 10.244.1.4:80 masquerade" {
					t.Fatalf("the attacker alone: %q, want its externalIP served", got)
				}
			}
			tr.OnServiceAdd(good)
			tr.OnEndpointSliceAdd(testSlice("good", readyEP("pod1")))
			if order == "attacker after good" {
				sync()
				addAttacker()
			}
			sync()
			if got := route(t, k, "10.96.0.10"); got != "dnat 10.244.1.2:80" {
				t.Fatalf("from a pod to good's ClusterIP: %q, want good's endpoint only", got)
			}
			if got := traceLocal(t, k, "10.96.0.10"); got != "dnat 10.244.1.2:80" {
				t.Fatalf("from the node to good's ClusterIP: %q, want good's endpoint only", got)
			}
			if got := route(t, k, "10.96.0.99"); got != "dnat 10.244.1.4:80" {
				t.Fatalf("the attacker's own ClusterIP: %q", got)
			}
			if len(conflicts) != 1 || conflicts[0].Service.Key.Name != "attacker" || conflicts[0].Winner.Name != "good" ||
				conflicts[0].External.Addr.String() != "10.96.0.10" || conflicts[0].Active != 1 {
				t.Fatalf("conflicts %+v, want the attacker's externalIP refused for good", conflicts)
			}

			tr.OnServiceDelete(good)
			sync()
			if got := route(t, k, "10.96.0.10"); got != "dnat 10.244.1.4:80 masquerade" {
				t.Fatalf("after good's deletion: %q, want the attacker's externalIP served", got)
			}
			if len(conflicts) != 2 || !conflicts[1].Resolved || conflicts[1].Active != 0 {
				t.Fatalf("resolution not reported: %+v", conflicts)
			}
		})
	}
}

// traceLocal is route for a connection the node itself opens.
func traceLocal(t *testing.T, k *nft.Fake, addr string) string {
	t.Helper()
	node := netip.MustParseAddr("10.0.0.1")
	return traceText(t, k, nft.Packet{Src: node, Dst: netip.MustParseAddr(addr), Proto: nft.ProtoTCP, DPort: 80, Local: true, NodeAddrs: []netip.Addr{node}})
}
