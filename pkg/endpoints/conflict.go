package endpoints

import (
	"cmp"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/types"
)

// ServiceRef is a Service with its UID, enough for an Event's involvedObject.
type ServiceRef struct {
	Key ServiceKey
	UID types.UID
}

// ConflictChange reports that a Service started, or stopped, being left unproxied
// because an older Service claims the same cluster IP, or (NodePort set) being
// served without one of its node ports because an older Service uses it, or
// (External set) being served without an external or load balancer IP on one port
// because it is another Service's ClusterIP or an older Service's external address
// on that port and protocol (see claimAddrsLocked).
//
// Two Services with one cluster IP cannot both be served: their ports would render
// to the same keys. The older one (metadata.creationTimestamp, then namespace/name)
// keeps the address; the other is not proxied at all on it, as if it had no cluster
// IP of this family (its other family, handled by another Tracker, is unaffected).
// When the winner goes, the next one in that order takes over in the same Take.
// Node ports are decided the same way among the Services that are proxied (see
// claimPortsLocked); the loser keeps everything else.
type ConflictChange struct {
	Service ServiceRef // the Service that is not proxied (or no longer conflicting)
	Winner  ServiceKey // who keeps the address or node port; zero when Resolved
	Addr    netip.Addr // the cluster IP; zero for a node port conflict
	// NodePort is the use of a node port Service is served without; zero for a
	// cluster IP conflict. WinnerUse is how Winner uses that port.
	NodePort, WinnerUse NodePortUse
	// External is the use of an external address Service is served without; zero
	// otherwise. WinnerExternal is how Winner uses that address and port: zero when
	// the address is Winner's ClusterIP, which its owner always keeps.
	External, WinnerExternal AddrUse
	// Resolved: Service is proxied again (with that node port or external address),
	// or was deleted or moved to another address (or node port).
	Resolved bool
	// Active is how many Services are left unproxied by cluster IP conflicts, or
	// served without an external address by an address conflict, after this Take;
	// ActiveNodePorts how many node port uses are left out by conflicts.
	Active, ActiveNodePorts int
}

// serviceEntry is what the tracker keeps of a proxied Service: its ports and what
// decides a conflict over its cluster IP.
type serviceEntry struct {
	ports []ServicePort
	// created is the creationTimestamp in Unix seconds, the API's precision: a
	// time.Time took 16 bytes more in each of tens of thousands of entries.
	created int64
	uid     types.UID
}

func (e serviceEntry) equal(o serviceEntry) bool {
	return e.created == o.created && e.uid == o.uid && slices.Equal(e.ports, o.ports)
}

// clusterIP is the address all ports of the Service share.
func (e serviceEntry) clusterIP() netip.Addr {
	if len(e.ports) == 0 {
		return netip.Addr{}
	}
	return e.ports[0].ClusterIP
}

// claimLocked records that key claims addr (valid) or gives up old, and marks
// every other claimant of either address dirty, so that a change of winner swaps
// both Services in the same Take (and the other claimants of their node ports and
// external addresses, which a Service holds only while it is proxied, and the
// Services whose external addresses are either address).
func (t *Tracker) claimLocked(key ServiceKey, old, addr netip.Addr) {
	// Whether and to whom external claims of either address are refused may change.
	t.markAddrClaimantsLocked(addr)
	if old == addr {
		for _, k := range t.claims[addr] {
			if k != key {
				t.markWithRivalsLocked(k)
			}
		}
		return
	}
	t.markAddrClaimantsLocked(old)
	if old.IsValid() {
		rest := slices.DeleteFunc(t.claims[old], func(k ServiceKey) bool { return k == key })
		if len(rest) == 0 {
			delete(t.claims, old)
		} else {
			t.claims[old] = rest
		}
		for _, k := range rest {
			t.markWithRivalsLocked(k)
		}
	}
	if addr.IsValid() {
		for _, k := range t.claims[addr] {
			t.markWithRivalsLocked(k)
		}
		t.claims[addr] = append(t.claims[addr], key)
	}
}

// winnerLocked returns which claimant of addr is proxied: the oldest, then the
// first by namespace/name.
func (t *Tracker) winnerLocked(addr netip.Addr) ServiceKey {
	return slices.MinFunc(t.claims[addr], func(a, b ServiceKey) int {
		ea, eb := t.services[a], t.services[b]
		return cmp.Or(cmp.Compare(ea.created, eb.created), compareServiceKeys(a, b))
	})
}

func compareServiceKeys(a, b ServiceKey) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// resolveLocked returns the ports key may use after conflicts (over its cluster IP,
// then over its node ports) are decided, and notes in changes whether its conflict
// state differs from what was last reported.
func (t *Tracker) resolveLocked(key ServiceKey, changes *[]ConflictChange) []ServicePort {
	e, ok := t.services[key]
	addr := e.clusterIP()
	var winner ServiceKey
	if ok && addr.IsValid() && len(t.claims[addr]) > 1 {
		winner = t.winnerLocked(addr)
	}
	lost := winner != (ServiceKey{}) && winner != key
	prev, wasLosing := t.losing[key]
	switch {
	case lost && (!wasLosing || prev != (lostTo{winner, addr})):
		t.losing[key] = lostTo{winner, addr}
		*changes = append(*changes, ConflictChange{Service: ServiceRef{key, e.uid}, Winner: winner, Addr: addr})
	case !lost && wasLosing:
		delete(t.losing, key)
		*changes = append(*changes, ConflictChange{Service: ServiceRef{key, e.uid}, Addr: prev.addr, Resolved: true})
	}
	ports := e.ports
	if lost {
		ports = nil
	}
	ref := ServiceRef{key, e.uid}
	return t.resolveAddrsLocked(key, ref, t.resolvePortsLocked(key, ref, ports, changes), changes)
}

// lostTo is a reported conflict: the winner and the address.
type lostTo struct {
	winner ServiceKey
	addr   netip.Addr
}

// ServiceUID returns the UID of a Service the tracker knows (proxied, or left out
// by a conflict), for Events about it.
func (t *Tracker) ServiceUID(key ServiceKey) (types.UID, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.services[key]
	return e.uid, ok
}
