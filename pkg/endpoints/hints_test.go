package endpoints

import (
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

func TestTopology(t *testing.T) {
	tests := []struct {
		name               string
		t                  Topology
		zone               string
		forZones, forNodes []string
	}{
		{name: "zero", t: Topology{}},
		{name: "no hints at all is the zero value", t: NewTopology("", nil, []string{})},
		{name: "zone only", t: NewTopology("a", nil, nil), zone: "a"},
		{name: "hints sorted and deduplicated", t: NewTopology("a", []string{"b", "a", "b"}, []string{"n2", "n1"}),
			zone: "a", forZones: []string{"a", "b"}, forNodes: []string{"n1", "n2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.t.Zone(); got != tt.zone {
				t.Errorf("Zone() = %q, want %q", got, tt.zone)
			}
			if diff := cmp.Diff(tt.forZones, tt.t.ForZones()); diff != "" {
				t.Errorf("ForZones (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.forNodes, tt.t.ForNodes()); diff != "" {
				t.Errorf("ForNodes (-want +got):\n%s", diff)
			}
			if got := tt.t.HasZoneHints(); got != (len(tt.forZones) > 0) {
				t.Errorf("HasZoneHints() = %v", got)
			}
			if got := tt.t.HasNodeHints(); got != (len(tt.forNodes) > 0) {
				t.Errorf("HasNodeHints() = %v", got)
			}
			for _, z := range tt.forZones {
				if !tt.t.ForZone(z) {
					t.Errorf("ForZone(%q) = false", z)
				}
			}
			for _, n := range tt.forNodes {
				if !tt.t.ForNode(n) {
					t.Errorf("ForNode(%q) = false", n)
				}
			}
			if tt.t.ForZone("") || tt.t.ForNode("") || tt.t.ForZone("c") || tt.t.ForNode("n") {
				t.Errorf("%v is for a name it does not list", tt.t)
			}
		})
	}
}

// The tracker compares slices with ==: equal content must give equal values,
// whatever the order of the hints, and a different hint a different value.
func TestTopologyComparable(t *testing.T) {
	a := NewTopology("z", []string{"x", "y"}, nil)
	if b := NewTopology("z", []string{"y", "x"}, nil); a != b || !a.Equal(b) {
		t.Errorf("same hints in another order differ: %v, %v", a, b)
	}
	if c := NewTopology("z", []string{"x"}, nil); a == c {
		t.Errorf("different hints compare equal: %v, %v", a, c)
	}
	// A prefix must not match: "zone-1" is not hinted "zone-10".
	if NewTopology("", []string{"zone-10"}, nil).ForZone("zone-1") {
		t.Error("ForZone matched a prefix")
	}
}

// Memory: the tracker holds hundreds of thousands of endpoints; topology must
// cost one pointer each.
func TestTopologySize(t *testing.T) {
	if s := unsafe.Sizeof(Topology{}); s != unsafe.Sizeof(uintptr(0)) {
		t.Errorf("Topology is %d bytes, want one pointer", s)
	}
}
