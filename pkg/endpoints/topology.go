package endpoints

import (
	"cmp"
	"slices"
)

// TopologyMode is which hints ClusterEndpoints followed.
type TopologyMode uint8

const (
	// TopologyNone: every usable endpoint (no hints, or hints ignored).
	TopologyNone TopologyMode = iota
	// TopologySameZone: the endpoints hinted for this node's zone
	// (trafficDistribution PreferClose / PreferSameZone, or topology-mode Auto).
	TopologySameZone
	// TopologySameNode: the endpoints hinted for this node (PreferSameNode).
	TopologySameNode
)

func (m TopologyMode) String() string {
	switch m {
	case TopologySameZone:
		return "PreferSameZone"
	case TopologySameNode:
		return "PreferSameNode"
	default:
		return "none"
	}
}

// Place is the node a proxy runs on, as topology sees it: its name and its
// Node's topology.kubernetes.io/zone label ("" when unlabelled).
type Place struct{ Node, Zone string }

// ClusterEndpoints returns the endpoints traffic under a Cluster traffic policy
// uses on the node at p: UsableEndpoints restricted by hints, with kube-proxy's
// rules (CategorizeEndpoints). Hints are judged on the ready endpoints only:
//   - node hints, when every ready endpoint has some and one names this node;
//   - else zone hints, when every ready endpoint has some and one names this
//     node's zone;
//   - else none: all usable endpoints.
//
// When no endpoint is ready, the serving terminating ones are used whatever their
// hints (a topology chosen from ready endpoints cannot apply to them). ignored says
// why hints present on some endpoint were not followed ("" when they were, or when
// there were none), for the caller to log. Sorted as UsableEndpoints sorts; never
// aliases eps. Local traffic policies take no hints: callers pick local endpoints
// themselves, as kube-proxy does.
func ClusterEndpoints(eps []Endpoint, p Place) (out []Endpoint, mode TopologyMode, ignored string) {
	mode, ignored = topologyMode(eps, p)
	if mode == TopologyNone {
		return UsableEndpoints(eps), mode, ignored
	}
	for _, e := range eps {
		if e.Ready && availableFor(e, mode, p) {
			out = append(out, e)
		}
	}
	// topologyMode only picks a mode some ready endpoint satisfies, so out is not
	// empty.
	slices.SortFunc(out, func(a, b Endpoint) int { return cmp.Or(compareEndpoints(a, b), compareConditions(a, b)) })
	return out, mode, ""
}

func topologyMode(eps []Endpoint, p Place) (TopologyMode, string) {
	var ready, anyHint bool
	allNode, forNode := true, false
	allZone, forZone := true, false
	for _, e := range eps {
		if !e.Ready {
			continue
		}
		ready = true
		t := e.Topology
		if t.HasNodeHints() {
			anyHint = true
			forNode = forNode || t.ForNode(p.Node)
		} else {
			allNode = false
		}
		if t.HasZoneHints() {
			anyHint = true
			forZone = forZone || t.ForZone(p.Zone)
		} else {
			allZone = false
		}
	}
	switch {
	case !ready || !anyHint:
		return TopologyNone, ""
	case allNode && forNode:
		return TopologySameNode, ""
	case allZone && forZone:
		return TopologySameZone, ""
	case allZone && p.Zone == "":
		return TopologyNone, "this node has no topology.kubernetes.io/zone label"
	case allZone:
		return TopologyNone, "no endpoint is hinted for this node's zone " + p.Zone
	case allNode:
		return TopologyNone, "no endpoint is hinted for this node, and some have no zone hint"
	default:
		return TopologyNone, "some ready endpoints have no hints"
	}
}

func availableFor(e Endpoint, mode TopologyMode, p Place) bool {
	switch mode {
	case TopologySameNode:
		return e.Topology.ForNode(p.Node)
	case TopologySameZone:
		return e.Topology.ForZone(p.Zone)
	default:
		return true
	}
}
