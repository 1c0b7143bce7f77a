package endpoints

import (
	"bytes"
	"cmp"
	"iter"
	"net/netip"
	"slices"
	"strconv"
	"time"
)

// Family selects which IP family of a (possibly dual-stack) Service and which
// EndpointSlices the tracker uses. The zero value is IPv4 so that an empty
// TrackerOptions does the common thing.
type Family uint8

const (
	IPv4 Family = iota
	IPv6
)

func (f Family) String() string {
	switch f {
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	default:
		return "Family(" + strconv.Itoa(int(f)) + ")"
	}
}

// matches reports whether addr belongs to family f. IPv4-mapped IPv6
// addresses count as IPv6: Kubernetes rejects them for cluster IPs and pod IPs,
// and treating them as IPv4 would silently program a different address.
func (f Family) matches(addr netip.Addr) bool {
	switch f {
	case IPv4:
		return addr.Is4()
	case IPv6:
		return addr.Is6() && !addr.Is4In6()
	default:
		return false
	}
}

// ServiceKey is namespace/name of a Service.
type ServiceKey struct{ Namespace, Name string }

func (k ServiceKey) String() string { return k.Namespace + "/" + k.Name }

// ServicePortName identifies one port of one Service; it is stable across
// ClusterIP/port-number changes, which is what lets a renderer keep chain
// names (and thus established state) when a Service is edited.
type ServicePortName struct {
	Namespace, Name string
	Port            string // the ServicePort's name ("" for a single unnamed port)
	Protocol        string // "TCP", "UDP" or "SCTP"
}

// String formats n as "namespace/name:port/PROTOCOL", or
// "namespace/name/PROTOCOL" when the port is unnamed. Kubernetes names cannot
// contain ':' or '/', so the form is unambiguous.
func (n ServicePortName) String() string {
	s := n.Namespace + "/" + n.Name
	if n.Port != "" {
		s += ":" + n.Port
	}
	return s + "/" + n.Protocol
}

// Key returns the Service this port belongs to.
func (n ServicePortName) Key() ServiceKey { return ServiceKey{Namespace: n.Namespace, Name: n.Name} }

func compareServicePortName(a, b ServicePortName) int {
	return cmp.Or(
		cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.Name, b.Name),
		cmp.Compare(a.Port, b.Port),
		cmp.Compare(a.Protocol, b.Protocol),
	)
}

// ServicePort is one proxied port of a Service. All fields are comparable so
// that "did anything that matters change" is a plain ==. The small fields sit
// together: 160 bytes, where padding between them made it 168 (tens of
// thousands of ports).
type ServicePort struct {
	Name      ServicePortName
	ClusterIP netip.Addr // the Service's cluster IP of the tracker's Family
	Port      uint16
	// NodePort is spec.ports[].nodePort of a NodePort or LoadBalancer Service: the
	// port served on the node's addresses. 0: none (a ClusterIP Service, or
	// allocateLoadBalancerNodePorts: false).
	NodePort uint16
	// HealthCheckNodePort is spec.healthCheckNodePort of a LoadBalancer Service with
	// ExternalLocal, where load balancers ask whether this node has local endpoints.
	HealthCheckNodePort uint16
	SessionAffinity     bool // sessionAffinity: ClientIP
	// InternalLocal is internalTrafficPolicy: Local: traffic goes only to endpoints on
	// the proxy's own node.
	InternalLocal bool
	// ExternalLocal is externalTrafficPolicy: Local on a port reachable from outside
	// (NodePort, external or load balancer IPs): outside traffic goes only to
	// endpoints on the proxy's node, with the client's address kept.
	ExternalLocal   bool
	AffinityTimeout time.Duration // only meaningful with SessionAffinity; 0 otherwise so unrelated edits are no-ops

	// ExternalIPs are spec.externalIPs of the tracker's Family.
	ExternalIPs AddrList
	// LoadBalancerIPs are status.loadBalancer.ingress[].ip of the tracker's Family
	// whose ipMode is VIP or unset (kube-proxy's IsVIPMode).
	LoadBalancerIPs AddrList
	// SourceRanges is loadBalancerSourceRanges: when set, only these sources may
	// reach LoadBalancerIPs (others are dropped).
	SourceRanges PrefixList
}

// External reports whether the port is reachable from outside the cluster.
func (sp ServicePort) External() bool {
	return sp.NodePort != 0 || sp.ExternalIPs != "" || sp.LoadBalancerIPs != ""
}

// Endpoint is one backend address:port of one ServicePort. It holds no pointer
// and takes 28 bytes (a netip.Addr alone is 24 with one pointer): the tracker
// keeps a million of them at 100k Services, and lists without pointers are never
// scanned by the collector. Set its address with WithAddr, read it with Addr.
type Endpoint struct {
	ip [16]byte // the address; an IPv4 one in its IPv4-mapped form
	// Topology is the endpoint's node, zone and hints, for traffic policies and
	// topology-aware routing (see ClusterEndpoints).
	Topology    Topology
	Port        uint16
	Ready       bool  // conditions.ready unset => true
	Serving     bool  // conditions.serving unset => true, as the API reference and kube-proxy say
	Terminating bool  // conditions.terminating unset => false
	bits        uint8 // ip's family: 32, 128, or 0 when no address is set
}

// Addr is the endpoint's address (the zero netip.Addr when none is set).
func (e Endpoint) Addr() netip.Addr {
	switch e.bits {
	case 32:
		return netip.AddrFrom4([4]byte(e.ip[12:]))
	case 128:
		return netip.AddrFrom16(e.ip)
	default:
		return netip.Addr{}
	}
}

// WithAddr is e at addr. Endpoint addresses never carry a zone (the tracker
// refuses them), so none is kept.
func (e Endpoint) WithAddr(addr netip.Addr) Endpoint {
	e.ip, e.bits = addr.As16(), uint8(addr.BitLen())
	return e
}

// NodeName is the endpoint's node ("" when its slice does not say).
func (e Endpoint) NodeName() string { return e.Topology.Node() }

// OnNode is e on node.
func (e Endpoint) OnNode(node string) Endpoint {
	e.Topology = e.Topology.WithNode(node)
	return e
}

// Equal reports whether e and o are the same; go-cmp uses it instead of looking
// into the unexported address.
func (e Endpoint) Equal(o Endpoint) bool { return e == o }

// String is for logs and test failures: "10.244.1.2:8080 ready serving node=... zone=...".
func (e Endpoint) String() string {
	s := e.AddrPort().String()
	for _, c := range []struct {
		on   bool
		name string
	}{{e.Ready, "ready"}, {e.Serving, "serving"}, {e.Terminating, "terminating"}} {
		if c.on {
			s += " " + c.name
		}
	}
	if e.Topology != (Topology{}) {
		s += " " + e.Topology.String()
	}
	return s
}

// AddrPort returns the endpoint's address and port together.
func (e Endpoint) AddrPort() netip.AddrPort { return netip.AddrPortFrom(e.Addr(), e.Port) }

// compareEndpoints orders by Addr then Port (IPv4 before IPv6, as
// netip.Addr.Compare does), which is the order renderers iterate in so that
// output is deterministic.
func compareEndpoints(a, b Endpoint) int {
	return cmp.Or(cmp.Compare(a.bits, b.bits), bytes.Compare(a.ip[:], b.ip[:]), cmp.Compare(a.Port, b.Port))
}

// Snapshot is an immutable-by-convention view for rendering.
//
// Its map is owned by the Tracker that produced it and is updated in place by
// its next Take (that is what makes Take O(changed)). Callers must not mutate
// it, nor the lists it hands out, and must finish using a Snapshot before
// calling Take again. Anything a renderer wants to remember across Takes (e.g.
// the ports it programmed for a Service) it must copy.
type Snapshot struct {
	// services holds each proxied Service's ports and their endpoints: one map
	// by Service rather than a map by port for the endpoints beside one by Service
	// for the ports (the second map, keyed by four strings, was ~7 MiB at 30k
	// Services on the shared bench shape).
	services map[ServiceKey]ServiceSnapshot
}

// ServiceSnapshot is one Service as a Snapshot holds it: its ports, sorted by
// port name then protocol, and each port's endpoints: the union of all the
// Service's EndpointSlices for that port name and protocol, deduplicated by
// Addr+Port, sorted by Addr then Port.
type ServiceSnapshot struct {
	ports []ServicePort
	eps   [][]Endpoint // eps[i] are ports[i]'s; shorter (nil) when the last have none
}

// ByPort gives a Service's endpoints by port: a ServiceSnapshot, or an
// EndpointMap for input that did not come through a Tracker.
type ByPort interface {
	Endpoints(ServicePortName) []Endpoint
}

// EndpointMap is endpoints by service port, as tests and offline input write
// them.
type EndpointMap map[ServicePortName][]Endpoint

// Endpoints returns n's endpoints.
func (m EndpointMap) Endpoints(n ServicePortName) []Endpoint { return m[n] }

// Ports returns the Service's ports: the snapshot's own list, never to change.
func (s ServiceSnapshot) Ports() []ServicePort { return s.ports }

// Endpoints returns the endpoints of the port named n; nil when it has none or
// is not one of the Service's ports.
func (s ServiceSnapshot) Endpoints(n ServicePortName) []Endpoint {
	for i := range s.ports {
		if i < len(s.eps) && s.ports[i].Name == n {
			return s.eps[i]
		}
	}
	return nil
}

// alignEndpoints lists eps in the order of ports, dropping the trailing ports
// without endpoints (nil when none has any).
func alignEndpoints(ports []ServicePort, eps ByPort) [][]Endpoint {
	var out [][]Endpoint
	for i, p := range ports {
		if e := eps.Endpoints(p.Name); len(e) > 0 {
			if out == nil {
				out = make([][]Endpoint, len(ports))
			}
			out[i] = e
		}
	}
	for len(out) > 0 && out[len(out)-1] == nil {
		out = out[:len(out)-1]
	}
	return out
}

// NewSnapshot is a snapshot of the given ports and endpoints, for renders of
// objects that did not come through a Tracker (tests, offline input).
func NewSnapshot(ports []ServicePort, eps EndpointMap) Snapshot {
	byService := map[ServiceKey][]ServicePort{}
	for _, sp := range ports {
		k := sp.Name.Key()
		byService[k] = append(byService[k], sp)
	}
	s := Snapshot{services: make(map[ServiceKey]ServiceSnapshot, len(byService))}
	for k, list := range byService {
		slices.SortFunc(list, func(a, b ServicePort) int { return compareServicePortName(a.Name, b.Name) })
		s.services[k] = ServiceSnapshot{ports: list, eps: alignEndpoints(list, eps)}
	}
	return s
}

// Service returns the Service's ports and endpoints; the zero ServiceSnapshot
// when it is absent or skipped.
func (s Snapshot) Service(key ServiceKey) ServiceSnapshot { return s.services[key] }

// ServicePortsOf returns the ports of a service in the snapshot, sorted by
// port name then protocol; nil if the Service is absent or skipped. The list is
// the snapshot's own: read it, never change it.
func (s Snapshot) ServicePortsOf(key ServiceKey) []ServicePort { return s.services[key].ports }

// Endpoints returns the endpoints of the service port n; nil when it has none.
func (s Snapshot) Endpoints(n ServicePortName) []Endpoint {
	return s.services[n.Key()].Endpoints(n)
}

// Services yields every proxied Service and its ports (see ServicePortsOf), in
// no particular order.
func (s Snapshot) Services() iter.Seq2[ServiceKey, []ServicePort] {
	return func(yield func(ServiceKey, []ServicePort) bool) {
		for k, svc := range s.services {
			if !yield(k, svc.ports) {
				return
			}
		}
	}
}

// Port returns the service port named n; the zero ServicePort when there is none.
func (s Snapshot) Port(n ServicePortName) ServicePort {
	for _, sp := range s.services[n.Key()].ports {
		if sp.Name == n {
			return sp
		}
	}
	return ServicePort{}
}

// PortCount is the number of service ports in the snapshot.
func (s Snapshot) PortCount() int {
	n := 0
	for _, svc := range s.services {
		n += len(svc.ports)
	}
	return n
}
