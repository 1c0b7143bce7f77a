package endpoints

import (
	"cmp"
	"slices"
)

// mergeEndpoints computes the endpoints of each port in ports from all the
// Service's slices, in the order of ports (see ServiceSnapshot.eps): nil for a
// port without endpoints, and the list ends at the last port that has some.
//
// The same address:port may be listed by several slices while an endpoint moves
// between them, or twice when a pod IP is reused before the old pod is gone; the
// most useful version is kept (compareConditions), the first seen among equals.
// Each slice's list is sorted already (extractSlice), so a port's list is the
// slices' lists put together, sorted (stable: a no-op for one slice) and
// compacted: a map per port, as this merge once made, was most of what the
// tracker allocated for a 100k cold start (87 MB for 14 kept).
func mergeEndpoints(ports []ServicePort, slicesByName serviceSlices) [][]Endpoint {
	if len(ports) == 0 || len(slicesByName) == 0 {
		return nil
	}
	if shared, ok := oneSliceEndpoints(ports, slicesByName); ok {
		return shared
	}
	var out [][]Endpoint
	for i, p := range ports {
		// By name and protocol, never by number: the slice carries the resolved
		// targetPort, the Service its own port.
		matches := func(sp slicePort) bool { return sp.Name == p.Name.Port && sp.Protocol == p.Name.Protocol }
		n := 0
		for _, d := range slicesByName {
			for _, sp := range d.Ports {
				if matches(sp) {
					n += len(d.Endpoints)
				}
			}
		}
		if n == 0 {
			continue
		}
		eps := make([]Endpoint, 0, n)
		for _, d := range slicesByName {
			for _, sp := range d.Ports {
				if !matches(sp) {
					continue
				}
				for _, e := range d.Endpoints {
					e.Port = sp.Port
					eps = append(eps, e)
				}
			}
		}
		byPreference := func(a, b Endpoint) int { return cmp.Or(compareEndpoints(a, b), compareConditions(a, b)) }
		if !slices.IsSortedFunc(eps, byPreference) {
			slices.SortStableFunc(eps, byPreference)
		}
		eps = slices.CompactFunc(eps, func(a, b Endpoint) bool { return a.AddrPort() == b.AddrPort() })
		if out == nil {
			out = make([][]Endpoint, len(ports))
		}
		out[i] = slices.Clip(eps)
	}
	last := len(out) - 1
	for last >= 0 && len(out[last]) == 0 {
		last--
	}
	if last < 0 {
		return nil
	}
	return out[: last+1 : last+1]
}

// oneSliceEndpoints is mergeEndpoints for the common Service: one port, one slice
// with one port, whose endpoints (already carrying that port, see sliceData) are
// distinct. The slice's own list is the result, capped so that an append by a
// reader copies instead of writing into it: the tracker then holds the endpoints
// once, not once per slice and again per port. ok is false when the general merge
// is needed.
func oneSliceEndpoints(ports []ServicePort, slicesByName serviceSlices) ([][]Endpoint, bool) {
	if len(ports) != 1 || len(slicesByName) != 1 {
		return nil, false
	}
	d := slicesByName[0].sliceData
	sp := ports[0].Name
	if len(d.Ports) != 1 || d.Ports[0].Name != sp.Port || d.Ports[0].Protocol != sp.Protocol {
		return nil, false
	}
	eps := d.Endpoints
	for i, e := range eps {
		// Sorted by address and port (extractSlice): a duplicate is next to its twin.
		if e.Port != d.Ports[0].Port || (i > 0 && eps[i-1].AddrPort() == e.AddrPort()) {
			return nil, false
		}
	}
	if len(eps) == 0 {
		return nil, true
	}
	return [][]Endpoint{eps[:len(eps):len(eps)]}, true
}
