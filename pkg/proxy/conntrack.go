package proxy

import (
	"net/netip"
	"slices"

	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

// udpTargets lists, per UDP port, the endpoints new connections may go to: the same
// choice the rendered rules make.
func udpTargets(ports []endpoints.ServicePort, eps map[endpoints.ServicePortName][]endpoints.Endpoint, node string) map[endpoints.ServicePortName]udpTarget {
	var out map[endpoints.ServicePortName]udpTarget
	for _, sp := range ports {
		if sp.Name.Protocol != "UDP" {
			continue
		}
		t := udpTarget{service: netip.AddrPortFrom(sp.ClusterIP, sp.Port)}
		usable, _ := targets(sp, eps[sp.Name], node)
		for _, e := range usable {
			t.eps = append(t.eps, e.Addr)
		}
		if out == nil {
			out = map[endpoints.ServicePortName]udpTarget{}
		}
		out[sp.Name] = t
	}
	return out
}

// clearStaleUDP deletes conntrack entries that still point at endpoints removed by
// the sync that just landed; without it a UDP client that keeps sending from the same
// port stays pinned to a dead endpoint.
func (p *Proxy) clearStaleUDP(old map[endpoints.ServiceKey]map[endpoints.ServicePortName]udpTarget) {
	if p.cfg.Conntrack == nil {
		return
	}
	for k, ports := range old {
		for n, before := range ports {
			after := p.udpEndpoints[k][n]
			for _, e := range before.eps {
				if after.service == before.service && slices.Contains(after.eps, e) {
					continue
				}
				deleted, err := p.cfg.Conntrack.ClearUDP(before.service, e)
				if err != nil {
					klog.ErrorS(err, "Clearing stale UDP conntrack entries", "servicePort", n.String())
					continue
				}
				p.cfg.Metrics.ConntrackDeleted.Add(float64(deleted))
			}
		}
	}
}
