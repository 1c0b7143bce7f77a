package proxy

import "github.com/svcproxy/svcproxy/pkg/endpoints"

// noLocalPorts counts, per Service, the ports with internalTrafficPolicy Local that
// have usable endpoints but none on this node (their traffic is dropped): what
// kube-proxy's kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy="internal"}
// counts, one per Service port.
type noLocalPorts struct {
	bySvc map[endpoints.ServiceKey]int
	total int
}

// update recounts one Service from its current ports (none: deleted).
func (n *noLocalPorts) update(k endpoints.ServiceKey, ports []endpoints.ServicePort, eps map[endpoints.ServicePortName][]endpoints.Endpoint, node string) {
	if n.bySvc == nil {
		n.bySvc = map[endpoints.ServiceKey]int{}
	}
	count := 0
	for _, sp := range ports {
		if _, noLocal := targets(sp, eps[sp.Name], node); noLocal {
			count++
		}
	}
	n.total += count - n.bySvc[k]
	if count == 0 {
		delete(n.bySvc, k)
	} else {
		n.bySvc[k] = count
	}
}
