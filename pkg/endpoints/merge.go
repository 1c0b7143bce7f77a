package endpoints

import (
	"net/netip"
	"slices"
)

// portMatch is how a slice port is matched to a ServicePort: by name and
// protocol, never by number, because the slice carries the resolved
// targetPort while the Service carries its own port.
type portMatch struct{ Name, Protocol string }

// mergeEndpoints computes the endpoints of each port in ports from all the
// Service's slices, in the order of ports (see ServiceSnapshot.eps): nil for a
// port without endpoints, and the list ends at the last port that has some.
func mergeEndpoints(ports []ServicePort, slicesByName serviceSlices) [][]Endpoint {
	if len(ports) == 0 || len(slicesByName) == 0 {
		return nil
	}
	if shared, ok := oneSliceEndpoints(ports, slicesByName); ok {
		return shared
	}
	wanted := make(map[portMatch]int, len(ports))
	for i, p := range ports {
		wanted[portMatch{p.Name.Port, p.Name.Protocol}] = i
	}

	// The same address:port may be listed by several slices while an endpoint
	// moves between them, or twice when a pod IP is reused before the old pod
	// is gone; keep the most useful version.
	best := make([]map[netip.AddrPort]Endpoint, len(ports))
	for _, d := range slicesByName {
		for _, sp := range d.Ports {
			i, ok := wanted[portMatch{sp.Name, sp.Protocol}]
			if !ok {
				continue
			}
			set := best[i]
			if set == nil {
				set = make(map[netip.AddrPort]Endpoint)
				best[i] = set
			}
			for _, e := range d.Endpoints {
				e.Port = sp.Port
				k := e.AddrPort()
				if cur, ok := set[k]; !ok || compareConditions(e, cur) < 0 {
					set[k] = e
				}
			}
		}
	}

	last := len(best) - 1
	for last >= 0 && len(best[last]) == 0 {
		last--
	}
	if last < 0 {
		return nil
	}
	out := make([][]Endpoint, last+1)
	for i, set := range best[:last+1] {
		if len(set) == 0 {
			continue
		}
		eps := make([]Endpoint, 0, len(set))
		for _, e := range set {
			eps = append(eps, e)
		}
		slices.SortFunc(eps, compareEndpoints)
		out[i] = eps
	}
	return out
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
