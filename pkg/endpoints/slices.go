package endpoints

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// sliceKey identifies an EndpointSlice. Slices are tracked by their own name,
// not their Service's, because a Service may have many and a slice may even
// be relabelled to another Service.
type sliceKey struct{ Namespace, Name string }

// slicePort is one entry of an EndpointSlice's ports, with API defaults
// applied.
type slicePort struct {
	Name     string
	Protocol string
	Port     uint16
}

// sliceData is what the tracker keeps of an EndpointSlice: only the values
// that can affect rendering, in canonical order, so that two versions of a
// slice can be compared to detect no-op updates.
type sliceData struct {
	// Service is the name of the slice's Service, in the slice's namespace: the
	// name alone keeps the struct in a smaller size class (tens of thousands).
	Service string
	Ports   []slicePort
	// Endpoints carry the slice's port when it has exactly one (the common case:
	// mergeEndpoints can then hand this very list to the snapshot instead of a
	// copy), else Port is zero and comes from Ports.
	Endpoints []Endpoint
}

// serviceSlices are one Service's slices by name. A Service has few (the
// EndpointSlice controller puts up to 100 endpoints in each), so a list searched
// by name costs less than a map per Service, which at 30k Services was ~250
// bytes each.
type serviceSlices []namedSlice

type namedSlice struct {
	name string
	*sliceData
}

// get returns the slice called name, nil if there is none.
func (ss serviceSlices) get(name string) *sliceData {
	for _, s := range ss {
		if s.name == name {
			return s.sliceData
		}
	}
	return nil
}

// with returns ss with the slice called name set to d.
func (ss serviceSlices) with(name string, d *sliceData) serviceSlices {
	for i := range ss {
		if ss[i].name == name {
			ss[i].sliceData = d
			return ss
		}
	}
	return append(ss, namedSlice{name: name, sliceData: d})
}

// without returns ss without the slice called name.
func (ss serviceSlices) without(name string) serviceSlices {
	return slices.DeleteFunc(ss, func(s namedSlice) bool { return s.name == name })
}

func (d *sliceData) equal(o *sliceData) bool {
	return d.Service == o.Service && slices.Equal(d.Ports, o.Ports) && slices.Equal(d.Endpoints, o.Endpoints)
}

func sliceKeyOf(s *discoveryv1.EndpointSlice) sliceKey {
	return sliceKey{Namespace: s.Namespace, Name: s.Name}
}

// extractSlice returns the renderable content of s, or nil when the slice is
// not for us: no Service label, FQDN or other-family addresses. Those are
// legitimate and silent; malformed entries go to report and only they are
// dropped.
func extractSlice(s *discoveryv1.EndpointSlice, fam Family, report func(error)) *sliceData {
	svcName := s.Labels[discoveryv1.LabelServiceName]
	if svcName == "" {
		return nil
	}
	if !addressTypeMatches(s.AddressType, fam) {
		return nil
	}
	d := &sliceData{Service: svcName}

	for i, p := range s.Ports {
		// A nil port means "all ports", which no proxy can implement; kube-proxy
		// ignores it too, so it is not reported as malformed.
		if p.Port == nil {
			continue
		}
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		proto := ""
		if p.Protocol != nil {
			proto = string(*p.Protocol)
		}
		proto, err := protocolOf(proto)
		if err != nil {
			report(fmt.Errorf("ports[%d] (%q): %w", i, name, err))
			continue
		}
		num, err := portNumber(*p.Port)
		if err != nil {
			report(fmt.Errorf("ports[%d] (%q): %w", i, name, err))
			continue
		}
		d.Ports = append(d.Ports, slicePort{Name: name, Protocol: proto, Port: num})
	}

	// Sized once: the tracker keeps this list for as long as the slice lives.
	d.Endpoints = make([]Endpoint, 0, len(s.Endpoints))
	for i, ep := range s.Endpoints {
		// The API says all addresses of an endpoint are fungible and consumers
		// may use only the first; kube-proxy does exactly that.
		if len(ep.Addresses) == 0 {
			report(fmt.Errorf("endpoints[%d]: no addresses", i))
			continue
		}
		addr, err := parseIPOfFamily(ep.Addresses[0], fam)
		if err != nil {
			report(fmt.Errorf("endpoints[%d]: %w", i, err))
			continue
		}
		if why := ReservedReason(addr); why != "" {
			// The API server refuses such addresses (ValidateEndpointIP); older or
			// hand-made objects may still carry them.
			report(fmt.Errorf("endpoints[%d]: address %s %s: skipped", i, addr, why))
			continue
		}
		d.Endpoints = append(d.Endpoints, endpointFromConditions(addr, ep))
	}

	slices.SortFunc(d.Ports, func(a, b slicePort) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port))
	})
	if len(d.Ports) == 1 {
		for i := range d.Endpoints {
			d.Endpoints[i].Port = d.Ports[0].Port
		}
	}
	if len(d.Endpoints) == 0 {
		d.Endpoints = nil // as before sizing: an empty slice compares and prints as none
	}
	slices.SortFunc(d.Endpoints, func(a, b Endpoint) int {
		return cmp.Or(compareEndpoints(a, b), compareConditions(a, b))
	})
	return d
}

// endpointFromConditions applies the API reference's defaults for unset
// conditions: ready and serving default to true, terminating to false.
func endpointFromConditions(addr netip.Addr, ep discoveryv1.Endpoint) Endpoint {
	c := ep.Conditions
	return Endpoint{
		Ready:       c.Ready == nil || *c.Ready,
		Serving:     c.Serving == nil || *c.Serving,
		Terminating: c.Terminating != nil && *c.Terminating,
		Topology:    topologyOf(ep),
	}.WithAddr(addr)
}

func addressTypeMatches(t discoveryv1.AddressType, fam Family) bool {
	switch t {
	case discoveryv1.AddressTypeIPv4:
		return fam == IPv4
	case discoveryv1.AddressTypeIPv6:
		return fam == IPv6
	default:
		return false
	}
}

// topologyOf is the endpoint's node, zone and hints (the zero Topology for
// endpoints without a nodeName of Services without trafficDistribution or
// topology mode).
func topologyOf(ep discoveryv1.Endpoint) Topology {
	var node, zone string
	if ep.NodeName != nil {
		node = *ep.NodeName
	}
	if ep.Zone != nil {
		zone = *ep.Zone
	}
	var forZones, forNodes []string
	if h := ep.Hints; h != nil {
		for _, z := range h.ForZones {
			forZones = append(forZones, z.Name)
		}
		for _, n := range h.ForNodes {
			forNodes = append(forNodes, n.Name)
		}
	}
	return newTopology(node, zone, forZones, forNodes)
}
