package proxy

import (
	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

// place is this node as topology-aware routing sees it.
func (o Options) place() endpoints.Place { return endpoints.Place{Node: o.NodeName, Zone: o.Zone} }

// clusterEndpoints are the endpoints of sp that traffic under a Cluster policy uses
// at here: the usable ones that EndpointSlice hints allow (see
// endpoints.ClusterEndpoints). kube-proxy has no metric for ignored hints; it logs,
// and so do we, at V(4) since a Service may be rendered every sync.
func clusterEndpoints(sp endpoints.ServicePort, eps []endpoints.Endpoint, here endpoints.Place) []endpoints.Endpoint {
	out, _, ignored := endpoints.ClusterEndpoints(eps, here)
	if ignored != "" {
		klog.V(4).InfoS("Ignoring topology hints", "servicePort", sp.Name.String(), "node", here.Node, "zone", here.Zone, "reason", ignored)
	}
	return out
}

// SetZone tells the Proxy this node's zone (its Node's topology.kubernetes.io/zone
// label; "" when unlabelled). A change re-renders every Service at the next sync,
// which it queues; the same zone again does nothing. Safe for concurrent use.
func (p *Proxy) SetZone(zone string) {
	p.mu.Lock()
	same := p.zone == zone
	p.zone = zone
	p.mu.Unlock()
	if !same {
		p.Trigger()
	}
}

// applyZone adopts the zone last set, in the loop's goroutine (the only one that
// reads cfg.Options), and reports whether it changed since the last render.
func (p *Proxy) applyZone() bool {
	p.mu.Lock()
	zone := p.zone
	p.mu.Unlock()
	if zone == p.cfg.Zone {
		return false
	}
	klog.InfoS("Rendering every Service for this node's zone (topology hints)", "zone", zone, "previous", p.cfg.Zone)
	p.cfg.Zone = zone
	return true
}

// withAllServices adds every Service of snap to changed (a fresh map: the tracker
// owns changed).
func withAllServices(snap endpoints.Snapshot, changed map[endpoints.ServiceKey]struct{}) map[endpoints.ServiceKey]struct{} {
	all := make(map[endpoints.ServiceKey]struct{}, len(changed))
	for k := range changed {
		all[k] = struct{}{}
	}
	for k := range snap.Services() {
		all[k] = struct{}{}
	}
	return all
}
