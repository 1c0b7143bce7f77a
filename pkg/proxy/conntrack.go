package proxy

import (
	"net/netip"
	"slices"

	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/conntrack"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// ConntrackReconciler deletes the UDP and SCTP conntrack entries towards a Service
// address of serving whose reply source is not one of its endpoints. It must not keep
// or modify serving: the Proxy updates it in place between calls.
type ConntrackReconciler interface {
	Reconcile(serving conntrack.Serving) (deleted uint, err error)
	// ReconcileUnanswered deletes the TCP entries of family (AF_INET, AF_INET6)
	// that never saw a reply and go to a Service address resolve knows without
	// being translated to one of its endpoints (conntrack.Cleaner).
	ReconcileUnanswered(family uint8, resolve func([]conntrack.Service) conntrack.Serving) (deleted uint, err error)
}

// servingTable is, for every UDP and SCTP Service port the kernel's rules serve, the
// endpoints they send new connections to. It is kept incrementally: a sync changes
// only the Services it rendered, and only once the kernel holds their rules, so that
// a refused or retried transaction never loses track of an endpoint still in use.
type servingTable struct {
	serving conntrack.Serving              // as the kernel's rules stand
	byOwner map[string][]conntrack.Service // the keys each owner put in serving
	pending map[string]conntrack.Serving   // rendered, not known to be in the kernel yet
	gone    map[conntrack.Service]bool     // keys removed since the last reconcile
	stale   bool                           // serving changed since the last reconcile
}

func newServingTable() *servingTable {
	return &servingTable{
		serving: conntrack.Serving{},
		byOwner: map[string][]conntrack.Service{},
		pending: map[string]conntrack.Serving{},
		gone:    map[conntrack.Service]bool{},
		stale:   true, // entries made while svcproxy was down: reconcile after the first sync
	}
}

// render records what owner's rules will serve once the kernel accepts them (nil:
// nothing).
func (s *servingTable) render(owner string, sv conntrack.Serving) { s.pending[owner] = sv }

// commit takes in the rendered state of every owner that has no change pending any
// more: the kernel holds its rules.
func (s *servingTable) commit(pending map[string]bool) {
	for owner, sv := range s.pending {
		if pending[owner] {
			continue
		}
		delete(s.pending, owner)
		for _, k := range s.byOwner[owner] {
			if _, keep := sv[k]; !keep {
				delete(s.serving, k)
				s.gone[k] = true
				s.stale = true
			}
		}
		keys := make([]conntrack.Service, 0, len(sv))
		for k, eps := range sv {
			if prev, ok := s.serving[k]; !ok || !slices.Equal(prev, eps) {
				s.stale = true
			}
			s.serving[k] = eps
			delete(s.gone, k)
			keys = append(keys, k)
		}
		if len(keys) == 0 {
			delete(s.byOwner, owner)
		} else {
			s.byOwner[owner] = keys
		}
	}
	s.pending = shrunk(s.pending)
}

// shrunk returns m, or a new map when m is empty: a Go map keeps its size when
// emptied, and a cold start's pending renders (30k owners) would stay allocated for
// good (4 MiB for the serving table at 30k).
func shrunk[K comparable, V any](m map[K]V) map[K]V {
	if len(m) == 0 {
		return map[K]V{}
	}
	return m
}

// reconcileConntrack deletes conntrack entries that no rule would create any more,
// after the first sync, whenever what the rules serve changed, and on resyncs.
// Addresses of Services that went away are passed once with no endpoints, so their
// entries go too.
func (p *Proxy) reconcileConntrack(full bool) {
	s := p.serving
	if p.cfg.Conntrack == nil || !(s.stale || full) {
		return
	}
	var gone []conntrack.Service
	for k := range s.gone {
		if _, ok := s.serving[k]; !ok {
			s.serving[k] = nil
			gone = append(gone, k)
		}
	}
	start := p.cfg.Clock.Now()
	deleted, err := p.cfg.Conntrack.Reconcile(p.withNodeAddresses(s.serving))
	p.cfg.Metrics.ConntrackSyncDuration.Observe(p.cfg.Clock.Since(start).Seconds())
	p.cfg.Metrics.ConntrackDeletedEntries.Add(float64(deleted))
	for _, k := range gone {
		delete(s.serving, k)
	}
	p.cfg.Metrics.ConntrackDeleted.Add(float64(deleted))
	if err != nil {
		klog.ErrorS(err, "Reconciling conntrack entries; will retry after the next sync")
		return
	}
	clear(s.gone)
	s.stale = false
}

// servingOf lists, per UDP and SCTP port of a Service, the endpoints whose flows may
// go on: every serving one (ready, or serving while terminating), wherever it runs,
// as upstream's reconciler keeps them. New connections go to fewer (the rules pick
// ready ones first and honour traffic policy), but a flow already on a draining or
// remote endpoint must not be cut while that endpoint still serves.
func servingOf(ports []endpoints.ServicePort, eps map[endpoints.ServicePortName][]endpoints.Endpoint) conntrack.Serving {
	var out conntrack.Serving
	for _, sp := range ports {
		keys := serviceAddresses(sp)
		if len(keys) == 0 || keys[0].Proto == nft.ProtoTCP {
			continue
		}
		to := servingEndpoints(sp, eps)
		if out == nil {
			out = conntrack.Serving{}
		}
		for _, k := range keys {
			out[k] = to
		}
	}
	return out
}

// serviceAddresses are the addresses clients reach sp on, as conntrack keys: its
// ClusterIP first, its external and load balancer IPs, and its NodePort under
// anyNodeAddress. External paths lead to the same endpoints: a flow that reached
// one of them untranslated (sent while the port had no endpoints, or before
// svcproxy ran: kubernetes #139628) must go once the port has endpoints, or a
// client that keeps its source port stays black-holed for as long as it keeps
// sending. None for a port svcproxy does not program.
func serviceAddresses(sp endpoints.ServicePort) []conntrack.Service {
	proto, ok := protoNumbers[sp.Name.Protocol]
	if !ok || !sp.ClusterIP.IsValid() || sp.Port == 0 {
		return nil
	}
	keys := []conntrack.Service{{Proto: proto, Addr: sp.ClusterIP, Port: sp.Port}}
	for _, a := range append(sp.ExternalIPs.Addrs(), sp.LoadBalancerIPs.Addrs()...) {
		keys = append(keys, conntrack.Service{Proto: proto, Addr: a, Port: sp.Port})
	}
	if sp.NodePort != 0 {
		keys = append(keys, conntrack.Service{Proto: proto, Addr: anyNodeAddress, Port: sp.NodePort})
	}
	return keys
}

// servingEndpoints are the endpoints of sp whose flows may go on: serving ones.
func servingEndpoints(sp endpoints.ServicePort, eps map[endpoints.ServicePortName][]endpoints.Endpoint) []netip.AddrPort {
	var to []netip.AddrPort
	for _, e := range programmable(eps[sp.Name], sp.ClusterIP) {
		if e.Ready || e.Serving {
			to = append(to, netip.AddrPortFrom(e.Addr, e.Port))
		}
	}
	return to
}

// anyNodeAddress stands, in a servingTable key, for each address NodePorts are
// served on; withNodeAddresses expands it when conntrack is reconciled, so that a
// change of node addresses needs no re-render of every NodePort.
var anyNodeAddress = netip.Addr{}

// withNodeAddresses returns serving with each NodePort key expanded to the node's
// NodePort addresses (and 127.0.0.1 with localhost NodePorts). serving itself is
// returned when it has no NodePort key.
func (p *Proxy) withNodeAddresses(serving conntrack.Serving) conntrack.Serving {
	var nodePorts []conntrack.Service
	for k := range serving {
		if k.Addr == anyNodeAddress {
			nodePorts = append(nodePorts, k)
		}
	}
	if len(nodePorts) == 0 {
		return serving
	}
	addrs := p.nodePortAddresses()
	out := make(conntrack.Serving, len(serving)+len(nodePorts)*len(addrs))
	for k, v := range serving {
		if k.Addr != anyNodeAddress {
			out[k] = v
		}
	}
	for _, k := range nodePorts {
		for _, a := range addrs {
			if _, taken := out[conntrack.Service{Proto: k.Proto, Addr: a, Port: k.Port}]; !taken {
				out[conntrack.Service{Proto: k.Proto, Addr: a, Port: k.Port}] = serving[k]
			}
		}
	}
	return out
}

// nodePortAddresses are the addresses NodePorts are served on: the node's NodePort
// addresses, and 127.0.0.1 with localhost NodePorts.
func (p *Proxy) nodePortAddresses() []netip.Addr {
	na := p.nodeAddresses()
	if servesLocalhost(p.cfg.Options, na) {
		return append(slices.Clone(na.Addrs), netip.AddrFrom4([4]byte{127, 0, 0, 1}))
	}
	return na.Addrs
}
