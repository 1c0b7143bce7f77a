package proxy

import "github.com/svcproxy/svcproxy/pkg/endpoints"

// noLocalPorts counts, per Service, the ports with a Local traffic policy that have
// usable endpoints but none on this node (their traffic is dropped): what kube-proxy's
// kubeproxy_sync_proxy_rules_no_local_endpoints_total counts, one per Service port,
// for traffic_policy="internal" (internalTrafficPolicy) and "external"
// (externalTrafficPolicy, on ports reachable from outside).
type noLocalPorts struct {
	bySvc           map[endpoints.ServiceKey][2]int
	total, external int
}

// update recounts one Service from its current ports (none: deleted).
func (n *noLocalPorts) update(k endpoints.ServiceKey, ports []endpoints.ServicePort, eps endpoints.ByPort, at endpoints.Place) {
	if n.bySvc == nil {
		n.bySvc = map[endpoints.ServiceKey][2]int{}
	}
	var count [2]int
	for _, sp := range ports {
		if _, noLocal := targets(sp, eps.Endpoints(sp.Name), at); noLocal {
			count[0]++
		}
		if sp.ExternalLocal {
			if x := externalSetsOf(sp, eps.Endpoints(sp.Name), at); len(x.cluster) > 0 && len(x.local) == 0 {
				count[1]++
			}
		}
	}
	old := n.bySvc[k]
	n.total += count[0] - old[0]
	n.external += count[1] - old[1]
	if count == [2]int{} {
		delete(n.bySvc, k)
	} else {
		n.bySvc[k] = count
	}
}
