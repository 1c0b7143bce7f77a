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
// Service's slices. Only ports with at least one endpoint appear in the
// result.
func mergeEndpoints(ports []ServicePort, slicesByName map[string]*sliceData) map[ServicePortName][]Endpoint {
	if len(ports) == 0 || len(slicesByName) == 0 {
		return nil
	}
	wanted := make(map[portMatch]ServicePortName, len(ports))
	for _, p := range ports {
		wanted[portMatch{p.Name.Port, p.Name.Protocol}] = p.Name
	}

	// The same address:port may be listed by several slices while an endpoint
	// moves between them, or twice when a pod IP is reused before the old pod
	// is gone; keep the most useful version.
	best := make(map[ServicePortName]map[netip.AddrPort]Endpoint)
	for _, d := range slicesByName {
		for _, sp := range d.Ports {
			name, ok := wanted[portMatch{sp.Name, sp.Protocol}]
			if !ok {
				continue
			}
			set := best[name]
			if set == nil {
				set = make(map[netip.AddrPort]Endpoint)
				best[name] = set
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

	out := make(map[ServicePortName][]Endpoint, len(best))
	for name, set := range best {
		eps := make([]Endpoint, 0, len(set))
		for _, e := range set {
			eps = append(eps, e)
		}
		slices.SortFunc(eps, compareEndpoints)
		out[name] = eps
	}
	return out
}
