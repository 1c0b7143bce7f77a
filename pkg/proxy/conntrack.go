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
// address of serving whose reply source is not one of its endpoints; entries
// towards addresses serving leaves out stay. It must not keep or modify serving.
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
	// changed are the keys whose endpoints changed, or that went away, since the
	// last reconcile: entries towards any other key were reconciled against the
	// endpoints it still has, and the rules create none that would be stale.
	changed map[conntrack.Service]bool
	all     bool         // the next reconcile covers every key, not only changed ones
	addrs   []netip.Addr // the NodePort addresses of the last reconcile
}

func newServingTable() *servingTable {
	return &servingTable{
		serving: conntrack.Serving{},
		byOwner: map[string][]conntrack.Service{},
		pending: map[string]conntrack.Serving{},
		changed: map[conntrack.Service]bool{},
		all:     true, // entries made while svcproxy was down: reconcile after the first sync
	}
}

// render records what owner's rules will serve once the kernel accepts them (nil:
// nothing).
func (s *servingTable) render(owner string, sv conntrack.Serving) { s.pending[owner] = sv }

// commit takes in the rendered state of every owner that has no change pending any
// more: the kernel holds its rules. Every such owner's keys it no longer renders go
// first, then the rendered keys are put in: a key handed from one owner to another
// in one sync (an external IP moving between Services) stays served whichever owner
// the map walk meets first.
func (s *servingTable) commit(pending map[string]bool) {
	var done []string
	for owner, sv := range s.pending {
		if pending[owner] {
			continue
		}
		done = append(done, owner)
		for _, k := range s.byOwner[owner] {
			if _, keep := sv[k]; !keep {
				delete(s.serving, k)
				s.changed[k] = true
			}
		}
	}
	for _, owner := range done {
		sv := s.pending[owner]
		delete(s.pending, owner)
		keys := make([]conntrack.Service, 0, len(sv))
		for k, eps := range sv {
			if prev, ok := s.serving[k]; !ok || !slices.Equal(prev, eps) {
				s.changed[k] = true
			}
			s.serving[k] = eps
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
// A sync that changed some Services hands the reconciler their addresses alone, so
// that its cost follows what changed, not the cluster (issue 22); the first sync,
// resyncs, the reconcile after a failed one and after the NodePort addresses
// changed hand it every address, for entries made while svcproxy was down or that
// a failed reconcile left. Addresses of Services that went away are passed once
// with no endpoints, so their entries go too.
func (p *Proxy) reconcileConntrack(full bool) {
	s := p.serving
	if p.cfg.Conntrack == nil || !(full || s.all || len(s.changed) > 0) {
		return
	}
	addrs := p.nodePortAddresses()
	start := p.cfg.Clock.Now()
	deleted, err := p.cfg.Conntrack.Reconcile(s.toReconcile(full || s.all || !slices.Equal(addrs, s.addrs), addrs))
	p.cfg.Metrics.ConntrackSyncDuration.Observe(p.cfg.Clock.Since(start).Seconds())
	p.cfg.Metrics.ConntrackDeletedEntries.Add(float64(deleted))
	p.cfg.Metrics.ConntrackDeleted.Add(float64(deleted))
	if err != nil {
		klog.ErrorS(err, "Reconciling conntrack entries; will retry after the next sync")
		s.all = true
		return
	}
	s.changed = map[conntrack.Service]bool{} // not clear: a cold start's keys would stay allocated, and walked
	s.all = false
	s.addrs = addrs
}

// toReconcile is what a reconcile hands the reconciler: the changed keys, or with
// all every key, each NodePort key expanded to the NodePort addresses addrs, with
// the endpoints the rules send it to (none for a key no longer served).
func (s *servingTable) toReconcile(all bool, addrs []netip.Addr) conntrack.Serving {
	out := conntrack.Serving{}
	add := func(k conntrack.Service) {
		if k.Addr != anyNodeAddress {
			out[k] = s.at(k, addrs)
			return
		}
		for _, a := range addrs {
			k.Addr = a
			out[k] = s.at(k, addrs)
		}
	}
	for k := range s.changed {
		add(k)
	}
	if all {
		for k := range s.serving {
			add(k)
		}
	}
	return out
}

// at returns the endpoints the rules send k's connections to: k's own, else, when
// k's address is one of the NodePort addresses addrs, those of the NodePort on k's
// port (a Service address that is also a node address wins, as in the rules).
func (s *servingTable) at(k conntrack.Service, addrs []netip.Addr) []netip.AddrPort {
	if eps, ok := s.serving[k]; ok || !slices.Contains(addrs, k.Addr) {
		return eps
	}
	return s.serving[conntrack.Service{Proto: k.Proto, Addr: anyNodeAddress, Port: k.Port}]
}

// servingOf lists, per UDP and SCTP port of a Service, the endpoints whose flows may
// go on: every serving one (ready, or serving while terminating), wherever it runs,
// as upstream's reconciler keeps them. New connections go to fewer (the rules pick
// ready ones first and honour traffic policy), but a flow already on a draining or
// remote endpoint must not be cut while that endpoint still serves.
func servingOf(ports []endpoints.ServicePort, eps endpoints.ByPort) conntrack.Serving {
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
func servingEndpoints(sp endpoints.ServicePort, eps endpoints.ByPort) []netip.AddrPort {
	var to []netip.AddrPort
	for _, e := range programmable(eps.Endpoints(sp.Name), sp.ClusterIP) {
		if e.Ready || e.Serving {
			to = append(to, netip.AddrPortFrom(e.Addr(), e.Port))
		}
	}
	return to
}

// anyNodeAddress stands, in a servingTable key, for each address NodePorts are
// served on; toReconcile expands it when conntrack is reconciled, so that a change
// of node addresses needs no re-render of every NodePort.
var anyNodeAddress = netip.Addr{}

// nodePortAddresses are the addresses NodePorts are served on: the node's NodePort
// addresses, and 127.0.0.1 with localhost NodePorts.
func (p *Proxy) nodePortAddresses() []netip.Addr {
	na := p.nodeAddresses()
	if servesLocalhost(p.cfg.Options, na) {
		return append(slices.Clone(na.Addrs), netip.AddrFrom4([4]byte{127, 0, 0, 1}))
	}
	return na.Addrs
}
