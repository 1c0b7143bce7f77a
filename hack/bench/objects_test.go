package main

import (
	"net/netip"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestObjects: in both shapes, a Service's slices hold size(i) endpoints under
// distinct names, at most 100 to a slice, endpointAddr names them, and a change
// (slice at gen > 0) replaces endpoint 0 alone; in the shared shape by a pod that
// other Services' slices list too, with ports targeted by name.
func TestObjects(t *testing.T) {
	const n = 2000
	for _, tc := range []struct {
		o            objects
		wantShared   bool // the replacement is another Service's endpoint too
		wantNamed    bool // the Service's targetPort is a name
		wantBigger   int  // some Service has more endpoints than this
		wantNodeless bool // some slices name no node
	}{
		{objects{shape: shapeDisjoint, endpoints: 10, nodes: 100}, false, false, 9, false},
		{objects{shape: shapeShared, endpoints: 10, nodes: 100}, true, true, 1000, true},
	} {
		t.Run(tc.o.shape, func(t *testing.T) {
			owners := map[string]int{} // address -> Services listing it
			names := map[string]bool{}
			biggest, nodeless := 0, false
			for i := range n {
				got := 0
				for _, s := range tc.o.slices(i) {
					if names[s.Name] {
						t.Fatalf("slice name %s twice", s.Name)
					}
					names[s.Name] = true
					if len(s.Endpoints) > 100 {
						t.Errorf("%s: %d endpoints in one slice", s.Name, len(s.Endpoints))
					}
					for _, e := range s.Endpoints {
						owners[e.Addresses[0]]++
						nodeless = nodeless || e.NodeName == nil
					}
					got += len(s.Endpoints)
				}
				if got != tc.o.size(i) {
					t.Fatalf("Service %d: %d endpoints in its slices, size %d", i, got, tc.o.size(i))
				}
				biggest = max(biggest, got)
				if first := tc.o.slices(i)[0].Endpoints; first[len(first)-1].Addresses[0] != tc.o.endpointAddr(i, len(first)-1) {
					t.Errorf("Service %d: endpointAddr disagrees with its slice", i)
				}
				if named := tc.o.service(i).Spec.Ports[0].TargetPort.Type == intstr.String; named != tc.wantNamed {
					t.Errorf("Service %d: targetPort by name %v, want %v", i, named, tc.wantNamed)
				}
			}
			if biggest <= tc.wantBigger || nodeless != tc.wantNodeless {
				t.Errorf("biggest Service %d endpoints (want > %d), slices without nodeName: %v (want %v)", biggest, tc.wantBigger, nodeless, tc.wantNodeless)
			}
			for _, i := range []int{3, 10, 999} {
				before, after := tc.o.slice(i, 0, time.Time{}), tc.o.slice(i, 5, time.Now())
				if after.Annotations == nil {
					t.Errorf("Service %d: a change without the trigger time", i)
				}
				diff := 0
				for j := range before.Endpoints {
					if before.Endpoints[j].Addresses[0] != after.Endpoints[j].Addresses[0] {
						diff++
					}
				}
				moved := after.Endpoints[0].Addresses[0]
				if diff != 1 || moved == before.Endpoints[0].Addresses[0] {
					t.Errorf("Service %d: a change moved %d endpoints, want endpoint 0 alone", i, diff)
				}
				if shared := owners[moved] > 0; shared != tc.wantShared {
					t.Errorf("Service %d: the new endpoint %s is other Services' too: %v, want %v", i, moved, shared, tc.wantShared)
				}
				if owners[before.Endpoints[0].Addresses[0]] > 1 != tc.wantShared {
					t.Errorf("Service %d: the endpoint replaced is shared: %v, want %v", i, !tc.wantShared, tc.wantShared)
				}
			}
		})
	}
}

func TestCheckShape(t *testing.T) {
	for shape, ok := range map[string]bool{"disjoint": true, "shared": true, "": false, "Shared": false} {
		if err := checkShape(shape); (err == nil) != ok {
			t.Errorf("checkShape(%q) = %v, want ok %v", shape, err, ok)
		}
	}
}

// TestServes: an answer from one of Service i's endpoints is its own, one from its
// neighbours' or from a changed endpoint is not.
func TestServes(t *testing.T) {
	for _, o := range []objects{{shape: shapeDisjoint, endpoints: 10}, {shape: shapeShared}} {
		for _, i := range []int{0, 7, 999} {
			serves := o.serves(i)
			for j := range o.size(i) {
				if a := netip.MustParseAddr(o.endpointAddr(i, j)); !serves(a) {
					t.Errorf("%s: Service %d does not serve its endpoint %d (%v)", o.shape, i, j, a)
				}
			}
			moved := netip.MustParseAddr(o.slice(i, 3, time.Time{}).Endpoints[0].Addresses[0])
			next := netip.MustParseAddr(o.endpointAddr(i+1, o.size(i+1)-1))
			if serves(moved) || serves(next) {
				t.Errorf("%s: Service %d serves %v or %v", o.shape, i, moved, next)
			}
		}
	}
}
