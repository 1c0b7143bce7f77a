package endpoints

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Topology is where an EndpointSlice says an endpoint is (endpoints[].nodeName
// and .zone) and which zones and nodes its hints (endpoints[].hints.forZones,
// .forNodes) say should use it. It is a 4-byte id into the process's table of
// topologies: the tracker holds a million endpoints at 100k Services, on a few
// hundred nodes and a handful of zones, mostly without hints, so equal values
// share one copy, and an id (unlike the unique.Handle it was) is not a pointer:
// the lists of endpoints hold none, and the collector never scans them.
// Comparable with ==, which is what lets the tracker drop no-op slice updates.
//
// The table only grows: a topology no endpoint uses any more keeps its entry.
// It holds one entry per node name, zone and hint combination the process has
// seen (a node's name and zone, ~100 bytes), so a cluster that replaces 10,000
// nodes during one svcproxy's life costs it about a megabyte.
type Topology struct{ id uint32 }

// topology is the interned value. The lists are sorted, deduplicated and joined
// with ',', which neither zone names (label values) nor node names (DNS
// subdomains) can contain.
type topology struct {
	node, zone, forZones, forNodes string
}

// topologies is the table behind Topology ids. Readers load the list without a
// lock: an entry, once appended, never changes, and a list that grows into a new
// array is published whole.
var topologies = struct {
	mu   sync.Mutex
	ids  map[topology]uint32
	list atomic.Pointer[[]topology] // list[0] is the zero topology
}{ids: map[topology]uint32{}}

func init() { topologies.list.Store(&[]topology{{}}) }

// intern returns the Topology of t.
func intern(t topology) Topology {
	if t == (topology{}) {
		return Topology{}
	}
	topologies.mu.Lock()
	defer topologies.mu.Unlock()
	if id, ok := topologies.ids[t]; ok {
		return Topology{id: id}
	}
	list := *topologies.list.Load()
	id := uint32(len(list))
	list = append(list, t)
	topologies.ids[t] = id
	topologies.list.Store(&list)
	return Topology{id: id}
}

// NewTopology returns the Topology of an endpoint in zone, hinted for forZones and
// forNodes (any may be empty; all empty is the zero Topology).
func NewTopology(zone string, forZones, forNodes []string) Topology {
	return newTopology("", zone, forZones, forNodes)
}

// newTopology is NewTopology of an endpoint on node.
func newTopology(node, zone string, forZones, forNodes []string) Topology {
	return intern(topology{node: node, zone: zone, forZones: joinSorted(forZones), forNodes: joinSorted(forNodes)})
}

func joinSorted(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	s := slices.Clone(names)
	slices.Sort(s)
	return strings.Join(slices.Compact(s), ",")
}

// WithNode is t for an endpoint on node.
func (t Topology) WithNode(node string) Topology {
	v := t.value()
	v.node = node
	return intern(v)
}

// Node is the endpoint's node ("" when the slice does not say).
func (t Topology) Node() string { return t.value().node }

func (t Topology) value() topology { return (*topologies.list.Load())[t.id] }

// Equal reports whether t and o are the same; go-cmp uses it instead of looking
// into the id.
func (t Topology) Equal(o Topology) bool { return t == o }

// Zone is the endpoint's zone ("" when the slice does not say).
func (t Topology) Zone() string { return t.value().zone }

// HasZoneHints reports whether the endpoint is hinted for some zone.
func (t Topology) HasZoneHints() bool { return t.value().forZones != "" }

// HasNodeHints reports whether the endpoint is hinted for some node.
func (t Topology) HasNodeHints() bool { return t.value().forNodes != "" }

// ForZone reports whether the endpoint's hints name zone.
func (t Topology) ForZone(zone string) bool { return zone != "" && listHas(t.value().forZones, zone) }

// ForNode reports whether the endpoint's hints name node.
func (t Topology) ForNode(node string) bool { return node != "" && listHas(t.value().forNodes, node) }

// ForZones and ForNodes are the hinted names, sorted (nil when none).
func (t Topology) ForZones() []string { return splitList(t.value().forZones) }
func (t Topology) ForNodes() []string { return splitList(t.value().forNodes) }

func listHas(list, name string) bool {
	for list != "" {
		var first string
		first, list, _ = strings.Cut(list, ",")
		if first == name {
			return true
		}
	}
	return false
}

func splitList(list string) []string {
	if list == "" {
		return nil
	}
	return strings.Split(list, ",")
}

// String is for logs and test failures: "zone=a forZones=a,b forNodes=n1".
func (t Topology) String() string {
	v := t.value()
	return "node=" + v.node + " zone=" + v.zone + " forZones=" + v.forZones + " forNodes=" + v.forNodes
}
