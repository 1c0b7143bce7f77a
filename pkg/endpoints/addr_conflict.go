package endpoints

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
)

// AddrUse is one use of an external address by a Service: a spec.externalIPs entry
// or (LoadBalancer) a status.loadBalancer.ingress IP, for one port and protocol.
type AddrUse struct {
	Addr         netip.Addr
	Protocol     string
	Port         uint16
	LoadBalancer bool
}

func (u AddrUse) String() string {
	field := "externalIP"
	if u.LoadBalancer {
		field = "load balancer IP"
	}
	return fmt.Sprintf("%s %s port %d/%s", field, u.Addr, u.Port, u.Protocol)
}

// addrKey is what two uses collide on: the address, the protocol and the port, the
// key of the external-ips map (and of service-ips, for a ClusterIP).
type addrKey struct {
	addr netip.Addr
	port slicePort
}

func (u AddrUse) key() addrKey {
	return addrKey{u.Addr, slicePort{Protocol: u.Protocol, Port: u.Port}}
}

func compareAddrUses(a, b AddrUse) int {
	return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol),
		compareBool(a.LoadBalancer, b.LoadBalancer))
}

// addrUses lists the external addresses ports use, one per address, port and
// protocol: an address that is both an externalIP and a load balancer IP counts as
// the externalIP.
func addrUses(ports []ServicePort) []AddrUse {
	var out []AddrUse
	for _, sp := range ports {
		ext := sp.ExternalIPs.Addrs()
		for _, a := range ext {
			out = append(out, AddrUse{Addr: a, Protocol: sp.Name.Protocol, Port: sp.Port})
		}
		for _, a := range sp.LoadBalancerIPs.Addrs() {
			if !slices.Contains(ext, a) {
				out = append(out, AddrUse{Addr: a, Protocol: sp.Name.Protocol, Port: sp.Port, LoadBalancer: true})
			}
		}
	}
	return out
}

// addrLoss is an external address use a Service is served without, and who keeps it.
type addrLoss struct {
	use       AddrUse
	winner    ServiceKey
	winnerUse AddrUse // zero: the address is winner's ClusterIP
}

// claimAddrsLocked moves key's external address claims from old to uses and marks
// every other claimant of either dirty, as the winner among them may change.
//
// An external or load balancer IP is whatever a user or a controller wrote, and it
// is keyed like a ClusterIP, its endpoints in the same maps: the same address, port
// and protocol in two Services would mix their endpoints. A ClusterIP, allocated by
// the API server to one Service, is never taken: an external address equal to
// another Service's ClusterIP is refused on every port (traffic to a ClusterIP's
// other ports is rejected, and stays so). Between two external claims the older
// Service (creationTimestamp, then namespace/name) keeps the address and port, as
// for ClusterIPs and node ports; Services may share an address on different ports
// (a load balancer's shared IP). The loser is served without that address until
// the winner goes.
func (t *Tracker) claimAddrsLocked(key ServiceKey, old, uses []AddrUse) {
	for _, u := range old {
		k := u.key()
		byPort := t.addrClaims[k.addr]
		rest := slices.DeleteFunc(byPort[k.port], func(c ServiceKey) bool { return c == key })
		switch {
		case len(rest) > 0:
			byPort[k.port] = rest
		case len(byPort) > 1:
			delete(byPort, k.port)
		default:
			delete(t.addrClaims, k.addr)
		}
		for _, c := range rest {
			t.markDirtyLocked(c)
		}
	}
	for _, u := range uses {
		k := u.key()
		byPort := t.addrClaims[k.addr]
		if byPort == nil {
			byPort = map[slicePort][]ServiceKey{}
			t.addrClaims[k.addr] = byPort
		}
		for _, c := range byPort[k.port] {
			t.markDirtyLocked(c)
		}
		byPort[k.port] = append(byPort[k.port], key)
	}
}

// markAddrClaimantsLocked marks dirty every Service that claims addr as an external
// address, on any port: addr just became, or stopped being, a ClusterIP (or its
// owner changed).
func (t *Tracker) markAddrClaimantsLocked(addr netip.Addr) {
	for _, keys := range t.addrClaims[addr] {
		for _, c := range keys {
			t.markDirtyLocked(c)
		}
	}
}

// addrWinnerLocked tells whether key loses its use u, to whom, and how the winner
// uses the address (zero: as its ClusterIP).
func (t *Tracker) addrWinnerLocked(key ServiceKey, u AddrUse) (addrLoss, bool) {
	if len(t.claims[u.Addr]) > 0 {
		if w := t.winnerLocked(u.Addr); w != key {
			return addrLoss{use: u, winner: w}, true
		}
		return addrLoss{}, false // key's own ClusterIP
	}
	k := u.key()
	claimants := t.addrClaims[k.addr][k.port]
	if len(claimants) < 2 {
		return addrLoss{}, false
	}
	if w, ok := t.oldestProxiedLocked(claimants); ok && w != key {
		return addrLoss{use: u, winner: w, winnerUse: t.addrUseOfLocked(w, k)}, true
	}
	return addrLoss{}, false
}

// addrUseOfLocked is how key uses the address and port k.
func (t *Tracker) addrUseOfLocked(key ServiceKey, k addrKey) AddrUse {
	for _, u := range addrUses(t.services[key].ports) {
		if u.key() == k {
			return u
		}
	}
	return AddrUse{}
}

// resolveAddrsLocked returns ports without the external addresses key loses, and
// notes in changes what differs from what was last reported. ports is nil when key
// is not proxied at all: it then holds no address, and every conflict it had is over.
func (t *Tracker) resolveAddrsLocked(key ServiceKey, ref ServiceRef, ports []ServicePort, changes *[]ConflictChange) []ServicePort {
	var lost map[addrKey]addrLoss
	for _, u := range addrUses(ports) {
		if l, ok := t.addrWinnerLocked(key, u); ok {
			if lost == nil {
				lost = map[addrKey]addrLoss{}
			}
			lost[u.key()] = l
		}
	}
	reportLosses(t.losingAddrs[key], lost, changes, func(_ addrKey, l addrLoss, resolved bool) ConflictChange {
		if resolved {
			return ConflictChange{Service: ref, External: l.use, Resolved: true}
		}
		return ConflictChange{Service: ref, Winner: l.winner, External: l.use, WinnerExternal: l.winnerUse}
	})
	if len(lost) == 0 {
		delete(t.losingAddrs, key)
		return ports
	}
	t.losingAddrs[key] = lost
	out := slices.Clone(ports)
	for i := range out {
		sp := &out[i]
		kept := func(a netip.Addr) bool {
			_, gone := lost[addrKey{a, slicePort{Protocol: sp.Name.Protocol, Port: sp.Port}}]
			return !gone
		}
		sp.ExternalIPs = sp.ExternalIPs.filter(kept)
		sp.LoadBalancerIPs = sp.LoadBalancerIPs.filter(kept)
		if sp.LoadBalancerIPs == "" {
			sp.SourceRanges = ""
		}
		sp.ExternalLocal = sp.ExternalLocal && sp.External()
	}
	return out
}

// filter returns the addresses of l that keep accepts.
func (l AddrList) filter(keep func(netip.Addr) bool) AddrList {
	if l == "" {
		return l
	}
	return NewAddrList(slices.DeleteFunc(l.Addrs(), func(a netip.Addr) bool { return !keep(a) }))
}
