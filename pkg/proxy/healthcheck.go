package proxy

import (
	"maps"
	"net/netip"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

// HealthCheckService is what the health check node port server answers for one
// Service with externalTrafficPolicy: Local: on NodePort, 200 when LocalEndpoints > 0
// and 503 otherwise, with kube-proxy's JSON.
type HealthCheckService struct {
	NodePort       uint16
	LocalEndpoints int
}

// HealthCheckServices returns, for every Service with externalTrafficPolicy Local and
// a healthCheckNodePort, its port and the number of its ready endpoints on nodeName
// (distinct addresses over all its ports, as kube-proxy counts them).
func HealthCheckServices(snap endpoints.Snapshot, nodeName string) map[endpoints.ServiceKey]HealthCheckService {
	out := map[endpoints.ServiceKey]HealthCheckService{}
	for k, ports := range snap.Services() {
		if hc, ok := healthCheckOf(ports, snap.Service(k), nodeName); ok {
			out[k] = hc
		}
	}
	return out
}

// healthCheckOf is HealthCheckServices for one Service's ports.
func healthCheckOf(ports []endpoints.ServicePort, eps endpoints.ByPort, node string) (HealthCheckService, bool) {
	var hc HealthCheckService
	local := map[netip.Addr]bool{}
	for _, sp := range ports {
		if !sp.ExternalLocal || sp.HealthCheckNodePort == 0 {
			continue
		}
		hc.NodePort = sp.HealthCheckNodePort
		for _, e := range eps.Endpoints(sp.Name) {
			if e.Ready && e.NodeName() == node {
				local[e.Addr()] = true
			}
		}
	}
	hc.LocalEndpoints = len(local)
	return hc, hc.NodePort != 0
}

// healthChecks keeps HealthCheckServices incrementally, one Service at a time, and
// tells whether anything changed since the hook was last called.
type healthChecks struct {
	m        map[endpoints.ServiceKey]HealthCheckService
	changed  bool
	notified bool // the hook has been called once (the first sync says even "none")
}

func (h *healthChecks) update(k endpoints.ServiceKey, ports []endpoints.ServicePort, eps endpoints.ByPort, node string) {
	if h.m == nil {
		h.m = map[endpoints.ServiceKey]HealthCheckService{}
	}
	hc, ok := healthCheckOf(ports, eps, node)
	old, had := h.m[k]
	switch {
	case ok && (!had || old != hc):
		h.m[k] = hc
		h.changed = true
	case !ok && had:
		delete(h.m, k)
		h.changed = true
	}
}

// notify calls hook with a copy of the current map if it changed since the last call.
func (h *healthChecks) notify(hook func(map[endpoints.ServiceKey]HealthCheckService)) {
	if hook == nil || (h.notified && !h.changed) {
		return
	}
	h.changed, h.notified = false, true
	out := maps.Clone(h.m)
	if out == nil {
		out = map[endpoints.ServiceKey]HealthCheckService{}
	}
	hook(out)
}
