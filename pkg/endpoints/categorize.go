package endpoints

import (
	"cmp"
	"slices"
)

// UsableEndpoints returns the endpoints new connections may use: the ready
// ones; if none is ready, those that are serving and terminating (kube-proxy's
// fallback, which keeps a Service answering during a rolling update whose old
// pods are draining); never the others. Sorted by Addr then Port whatever the
// input order, so renderers produce deterministic output. It returns nil when
// nothing is usable, and eps itself when every endpoint is ready and eps is in
// that order already (a snapshot's lists are: the common case, which took a copy
// of every endpoint list a sync rendered), so the result is for reading only.
func UsableEndpoints(eps []Endpoint) []Endpoint {
	if len(eps) > 0 && readyInOrder(eps) {
		return eps
	}
	ready := make([]Endpoint, 0, len(eps)) // usually all of them
	var fallback []Endpoint
	for _, e := range eps {
		switch {
		case e.Ready:
			ready = append(ready, e)
		case e.Serving && e.Terminating:
			fallback = append(fallback, e)
		}
	}
	out := ready
	if len(out) == 0 {
		out = fallback
	}
	slices.SortFunc(out, func(a, b Endpoint) int { return cmp.Or(compareEndpoints(a, b), compareConditions(a, b)) })
	return out
}

// readyInOrder reports whether every endpoint of eps is ready and eps is sorted by
// Addr then Port without two alike: what UsableEndpoints would return anyway.
func readyInOrder(eps []Endpoint) bool {
	for i, e := range eps {
		if !e.Ready || i > 0 && compareEndpoints(eps[i-1], e) >= 0 {
			return false
		}
	}
	return true
}

// compareConditions orders endpoints for the same address by preference:
// ready first, then serving, then not terminating, then node name. It is a
// total order over the remaining fields so that picking "the smallest" among
// duplicates does not depend on the order slices were seen in.
func compareConditions(a, b Endpoint) int {
	return cmp.Or(
		compareBoolTrueFirst(a.Ready, b.Ready),
		compareBoolTrueFirst(a.Serving, b.Serving),
		compareBoolTrueFirst(!a.Terminating, !b.Terminating),
		cmp.Compare(a.NodeName(), b.NodeName()),
	)
}

func compareBoolTrueFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	default:
		return 1
	}
}
