package proxy

import (
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
