package endpoints

import (
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// created sets a Service's creationTimestamp and UID.
func created(at time.Time, uid string) svcOpt {
	return func(s *v1.Service) {
		s.CreationTimestamp = metav1.NewTime(at)
		s.UID = types.UID(uid)
	}
}

func TestTrackerClusterIPConflicts(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	shared := "10.96.0.10"
	mk := func(ns, name string, at time.Time) *v1.Service {
		return makeService(ns, name, shared, []v1.ServicePort{tcpPort("http", 80)}, created(at, ns+"-"+name))
	}
	key := func(ns, name string) ServiceKey { return ServiceKey{ns, name} }
	tests := []struct {
		name       string
		services   []*v1.Service // added in this order, then in reverse in a second tracker
		wantWinner ServiceKey
	}{
		{name: "older wins", services: []*v1.Service{mk("z", "old", t0), mk("a", "young", t0.Add(time.Second))}, wantWinner: key("z", "old")},
		{name: "same age: namespace first", services: []*v1.Service{mk("b", "a", t0), mk("a", "z", t0)}, wantWinner: key("a", "z")},
		{name: "same age and namespace: name", services: []*v1.Service{mk("ns", "b", t0), mk("ns", "a", t0)}, wantWinner: key("ns", "a")},
		{name: "no timestamps (manifests): namespace/name", services: []*v1.Service{mk("ns", "b", time.Time{}), mk("ns", "a", time.Time{}), mk("ns", "c", time.Time{})}, wantWinner: key("ns", "a")},
	}
	for _, tc := range tests {
		takeInBothOrders(t, tc.name, tc.services, func(t *testing.T, snap Snapshot, got []ConflictChange) {
			var served []ServiceKey
			for _, ports := range snap.Services() {
				for _, sp := range ports {
					served = append(served, sp.Name.Key())
				}
			}
			if len(served) != 1 || served[0] != tc.wantWinner {
				t.Fatalf("served %v, want only %v", served, tc.wantWinner)
			}
			if len(got) != len(tc.services)-1 {
				t.Fatalf("conflicts %+v, want %d", got, len(tc.services)-1)
			}
			for _, c := range got {
				if c.Winner != tc.wantWinner || c.Service.Key == tc.wantWinner || c.Resolved || c.Addr != netip.MustParseAddr(shared) ||
					string(c.Service.UID) != c.Service.Key.Namespace+"-"+c.Service.Key.Name || c.Active != len(tc.services)-1 {
					t.Fatalf("conflict %+v", c)
				}
			}
		})
	}
}

// TestTrackerConflictHandover: the winner's deletion marks both changed in one Take
// and reports the loser's conflict resolved; resyncs report nothing.
func TestTrackerConflictHandover(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	old := makeService("ns", "old", "10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}, created(t0, "u-old"))
	young := makeService("ns", "young", "10.96.0.10", []v1.ServicePort{tcpPort("web", 8080)}, created(t0.Add(time.Hour), "u-young"))
	var got []ConflictChange
	tr := NewTracker(TrackerOptions{OnConflict: func(c ConflictChange) { got = append(got, c) }})
	tr.OnServiceAdd(young)
	tr.OnEndpointSliceAdd(makeSlice("ns", "young-1", "young", []discoveryv1.EndpointPort{slicePortOf("web", v1.ProtocolTCP, 8080)}, readyEP("10.0.0.2")))
	_, changed, _ := tr.Take()
	mustEqualf(t, len(changed), 1, "young alone changed")

	tr.OnServiceAdd(old)
	snap, changed, _ := tr.Take()
	mustEqualf(t, len(changed), 2, "the older Service's arrival changes both")
	if ps := snap.ServicePortsOf(ServiceKey{"ns", "young"}); ps != nil {
		t.Fatalf("loser still served: %+v", ps)
	}
	if eps := snap.Endpoints(spnOf(ServiceKey{"ns", "young"}, "web", "TCP")); eps != nil {
		t.Fatal("loser's endpoints still in the snapshot")
	}
	mustEqualf(t, len(got), 1, "conflicts reported")

	tr.OnServiceUpdate(old, old)
	tr.OnServiceUpdate(young, young)
	_, changed, _ = tr.Take()
	mustEqualf(t, len(changed), 0, "resync changes nothing")
	mustEqualf(t, len(got), 1, "resync reports nothing")
	if uid, ok := tr.ServiceUID(ServiceKey{"ns", "young"}); !ok || uid != "u-young" {
		t.Fatalf("ServiceUID(loser) = %q, %v", uid, ok)
	}

	tr.OnServiceDelete(old)
	snap, changed, _ = tr.Take()
	if _, ok := changed[ServiceKey{"ns", "old"}]; !ok || len(changed) != 2 {
		t.Fatalf("changed %v, want both Services", changed)
	}
	ps := snap.ServicePortsOf(ServiceKey{"ns", "young"})
	if len(ps) != 1 || ps[0].Port != 8080 || len(snap.Endpoints(ps[0].Name)) != 1 {
		t.Fatalf("loser not served after the winner's deletion: %+v %v", ps, endpointsByName(snap))
	}
	if len(got) != 2 || !got[1].Resolved || got[1].Service.Key != (ServiceKey{"ns", "young"}) || got[1].Active != 0 {
		t.Fatalf("resolution: %+v", got)
	}
}

// TestTrackerConflictEndsWhenTheLoserMoves: changing the loser's cluster IP serves it
// at its new address and resolves the conflict.
func TestTrackerConflictEndsWhenTheLoserMoves(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	a := makeService("ns", "a", "10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}, created(t0, "ua"))
	b := makeService("ns", "b", "10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}, created(t0, "ub"))
	var got []ConflictChange
	tr := NewTracker(TrackerOptions{OnConflict: func(c ConflictChange) { got = append(got, c) }})
	tr.OnServiceAdd(a)
	tr.OnServiceAdd(b)
	tr.Take()
	moved := b.DeepCopy()
	moved.Spec.ClusterIP, moved.Spec.ClusterIPs = "10.96.0.11", []string{"10.96.0.11"}
	tr.OnServiceUpdate(b, moved)
	snap, _, _ := tr.Take()
	if ps := snap.ServicePortsOf(ServiceKey{"ns", "b"}); len(ps) != 1 || ps[0].ClusterIP != netip.MustParseAddr("10.96.0.11") {
		t.Fatalf("moved Service: %+v", ps)
	}
	if ps := snap.ServicePortsOf(ServiceKey{"ns", "a"}); len(ps) != 1 {
		t.Fatalf("winner: %+v", ps)
	}
	if len(got) != 2 || !got[1].Resolved || got[1].Active != 0 {
		t.Fatalf("conflicts: %+v", got)
	}
}
