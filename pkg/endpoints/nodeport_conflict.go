package endpoints

import (
	"cmp"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// NodePortUse is one use of a node port by a Service: a spec.ports[].nodePort of
// Protocol, or (HealthCheck) its spec.healthCheckNodePort, which is served over TCP.
type NodePortUse struct {
	Protocol    string
	Port        uint16
	HealthCheck bool
}

func (u NodePortUse) String() string {
	if u.HealthCheck {
		return fmt.Sprintf("healthCheckNodePort %d", u.Port)
	}
	return fmt.Sprintf("nodePort %d/%s", u.Port, u.Protocol)
}

// key is what two uses collide on: the protocol and the number.
func (u NodePortUse) key() slicePort { return slicePort{Protocol: u.Protocol, Port: u.Port} }

func compareNodePortUses(a, b NodePortUse) int {
	return cmp.Or(cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol), compareBool(a.HealthCheck, b.HealthCheck))
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// nodePortUses lists the node ports the Service's ports use, in order: every
// nodePort, and the health check node port where the health check server would
// serve it (healthCheckOf). servicePorts leaves no two with one key.
func (e serviceEntry) nodePortUses() []NodePortUse {
	var out []NodePortUse
	hc := uint16(0)
	for _, sp := range e.ports {
		if sp.NodePort != 0 {
			out = append(out, NodePortUse{Protocol: sp.Name.Protocol, Port: sp.NodePort})
		}
		if sp.ExternalLocal && sp.HealthCheckNodePort != 0 {
			hc = sp.HealthCheckNodePort
		}
	}
	if hc != 0 {
		out = append(out, NodePortUse{Protocol: string(v1.ProtocolTCP), Port: hc, HealthCheck: true})
	}
	slices.SortFunc(out, compareNodePortUses)
	return out
}

// portLoss is a node port use a Service is served without, and who keeps the port.
type portLoss struct {
	winner    ServiceKey
	winnerUse NodePortUse
}

// claimPortsLocked moves key's node port claims from old to uses and marks every
// other claimant of either dirty, as the winner among them may change.
//
// Two Services cannot share a node port and protocol: nftables would send both
// Services' traffic to whichever rule the port's key holds, and a health check port
// that is another Service's TCP nodePort would send the load balancer's probes to
// that Service's pods, not to the health check server. The API server allocates
// both from one range, so this comes from manifests (or a race). As with cluster
// IPs, the older Service (creationTimestamp, then namespace/name) keeps the port,
// and the other is served without it until the older one goes.
func (t *Tracker) claimPortsLocked(key ServiceKey, old, uses []NodePortUse) {
	for _, u := range old {
		k := u.key()
		rest := slices.DeleteFunc(t.portClaims[k], func(c ServiceKey) bool { return c == key })
		if len(rest) == 0 {
			delete(t.portClaims, k)
		} else {
			t.portClaims[k] = rest
		}
		for _, c := range rest {
			t.markDirtyLocked(c)
		}
	}
	for _, u := range uses {
		k := u.key()
		for _, c := range t.portClaims[k] {
			t.markDirtyLocked(c)
		}
		t.portClaims[k] = append(t.portClaims[k], key)
	}
}

// markWithRivalsLocked marks key dirty and, since whether it is proxied at all (its
// cluster IP conflict) decides who wins its node ports and external addresses, the
// other claimants of those too.
func (t *Tracker) markWithRivalsLocked(key ServiceKey) {
	t.markDirtyLocked(key)
	e := t.services[key]
	for _, u := range e.nodePortUses() {
		t.markOthersLocked(key, t.portClaims[u.key()])
	}
	for _, u := range addrUses(e.ports) {
		k := u.key()
		t.markOthersLocked(key, t.addrClaims[k.addr][k.port])
	}
}

// markOthersLocked marks the claimants other than key dirty.
func (t *Tracker) markOthersLocked(key ServiceKey, claimants []ServiceKey) {
	for _, c := range claimants {
		if c != key {
			t.markDirtyLocked(c)
		}
	}
}

// losesClusterIPLocked tells whether key is left unproxied by a cluster IP
// conflict; such a Service holds none of its node ports.
func (t *Tracker) losesClusterIPLocked(key ServiceKey) bool {
	addr := t.services[key].clusterIP()
	return addr.IsValid() && len(t.claims[addr]) > 1 && t.winnerLocked(addr) != key
}

// portWinnerLocked returns which claimant of k keeps it: the oldest, then the first
// by namespace/name, of those proxied; false when none is.
func (t *Tracker) portWinnerLocked(k slicePort) (ServiceKey, bool) {
	return t.oldestProxiedLocked(t.portClaims[k])
}

// oldestProxiedLocked returns the oldest, then the first by namespace/name, of the
// claimants that are proxied; false when none is.
func (t *Tracker) oldestProxiedLocked(claimants []ServiceKey) (ServiceKey, bool) {
	var winner ServiceKey
	found := false
	for _, c := range claimants {
		if t.losesClusterIPLocked(c) {
			continue
		}
		if !found || cmp.Or(cmp.Compare(t.services[c].created, t.services[winner].created), compareServiceKeys(c, winner)) < 0 {
			winner, found = c, true
		}
	}
	return winner, found
}

// resolvePortsLocked returns ports without the node port uses key loses to older
// Services, and notes in changes what differs from what was last reported. ports
// is nil when key is not proxied at all (deleted, or it lost its cluster IP): it
// then holds no node port, and every conflict it had is over.
func (t *Tracker) resolvePortsLocked(key ServiceKey, ref ServiceRef, ports []ServicePort, changes *[]ConflictChange) []ServicePort {
	var lost map[NodePortUse]portLoss
	if ports != nil {
		for _, u := range t.services[key].nodePortUses() {
			if len(t.portClaims[u.key()]) < 2 {
				continue
			}
			if w, ok := t.portWinnerLocked(u.key()); ok && w != key {
				if lost == nil {
					lost = map[NodePortUse]portLoss{}
				}
				lost[u] = portLoss{winner: w, winnerUse: t.useOfLocked(w, u.key())}
			}
		}
	}
	prev := t.losingPorts[key]
	reportLosses(prev, lost, changes, func(u NodePortUse, l portLoss, resolved bool) ConflictChange {
		if resolved {
			return ConflictChange{Service: ref, NodePort: u, Resolved: true}
		}
		return ConflictChange{Service: ref, Winner: l.winner, NodePort: u, WinnerUse: l.winnerUse}
	})
	t.losingPortCount += len(lost) - len(prev)
	if len(lost) == 0 {
		delete(t.losingPorts, key)
		return ports
	}
	t.losingPorts[key] = lost
	out := slices.Clone(ports)
	for i := range out {
		sp := &out[i]
		if _, ok := lost[NodePortUse{Protocol: sp.Name.Protocol, Port: sp.NodePort}]; ok {
			sp.NodePort = 0
		}
		if _, ok := lost[NodePortUse{Protocol: string(v1.ProtocolTCP), Port: sp.HealthCheckNodePort, HealthCheck: true}]; ok {
			sp.HealthCheckNodePort = 0
		}
		sp.ExternalLocal = sp.ExternalLocal && sp.External()
	}
	return out
}

// useOfLocked is how key uses the node port k.
func (t *Tracker) useOfLocked(key ServiceKey, k slicePort) NodePortUse {
	for _, u := range t.services[key].nodePortUses() {
		if u.key() == k {
			return u
		}
	}
	return NodePortUse{}
}

// reportLosses appends to changes what differs between the losses last reported
// (prev) and now (lost): change(k, l, false) for each new or changed loss,
// change(k, l, true) for each that is over.
func reportLosses[K, L comparable](prev, lost map[K]L, changes *[]ConflictChange, change func(k K, l L, resolved bool) ConflictChange) {
	for k, l := range lost {
		if p, ok := prev[k]; !ok || p != l {
			*changes = append(*changes, change(k, l, false))
		}
	}
	for k, p := range prev {
		if _, ok := lost[k]; !ok {
			*changes = append(*changes, change(k, p, true))
		}
	}
}
