package endpoints

import (
	"reflect"
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

// Memory: the tracker holds a million endpoints at 100k Services; each must
// cost 28 bytes and hold no pointer, so that the collector skips their lists.
func TestEndpointSize(t *testing.T) {
	if s := unsafe.Sizeof(Endpoint{}); s != 28 {
		t.Errorf("Endpoint is %d bytes, want 28", s)
	}
	if p := pointerIn(reflect.TypeFor[Endpoint]()); p != "" {
		t.Errorf("Endpoint holds a pointer: %s", p)
	}
}

// pointerIn names the first field of t that is or holds a pointer ("" if none).
func pointerIn(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			if p := pointerIn(t.Field(i).Type); p != "" {
				return t.Field(i).Name + "." + p
			}
		}
		return ""
	case reflect.Array:
		return pointerIn(t.Elem())
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return ""
	default:
		return t.String()
	}
}
