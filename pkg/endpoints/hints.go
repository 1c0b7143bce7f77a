package endpoints

import (
	"slices"
	"strings"
	"unique"
)

// Topology is where an EndpointSlice says an endpoint is (endpoints[].nodeName
// and .zone) and which zones and nodes its hints (endpoints[].hints.forZones,
// .forNodes) say should use it. It is one interned handle, 8 bytes in every
// Endpoint: the tracker holds 300k endpoints at 30k Services, on a few hundred
// nodes and a handful of zones, mostly without hints, so equal values share one
// copy (the node's name was a 16-byte string in each Endpoint), and an endpoint
// without any costs no allocation. Comparable with ==, which is what lets the
// tracker drop no-op slice updates.
type Topology struct{ h unique.Handle[topology] }

// topology is the interned value. The lists are sorted, deduplicated and joined
// with ',', which neither zone names (label values) nor node names (DNS
// subdomains) can contain.
type topology struct {
	node, zone, forZones, forNodes string
}

// NewTopology returns the Topology of an endpoint in zone, hinted for forZones and
// forNodes (any may be empty; all empty is the zero Topology).
func NewTopology(zone string, forZones, forNodes []string) Topology {
	t := topology{zone: zone, forZones: joinSorted(forZones), forNodes: joinSorted(forNodes)}
	if t == (topology{}) {
		return Topology{}
	}
	return Topology{h: unique.Make(t)}
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
	if v == (topology{}) {
		return Topology{}
	}
	return Topology{h: unique.Make(v)}
}

// Node is the endpoint's node ("" when the slice does not say).
func (t Topology) Node() string { return t.value().node }

func (t Topology) value() topology {
	if t == (Topology{}) {
		return topology{}
	}
	return t.h.Value()
}

// Equal reports whether t and o are the same; go-cmp uses it instead of looking
// into the handle's unexported fields.
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
