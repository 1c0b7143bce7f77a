package endpoints

import "net/netip"

// Destination is an address, port and protocol a client sent to, as a
// connection tracking entry records it.
type Destination struct {
	Addr     netip.Addr
	Protocol string // "TCP", "UDP", "SCTP"
	Port     uint16
	// NodeAddr says Addr is one of the addresses node ports are served on.
	NodeAddr bool
}

// ClaimantsOf adds to out every Service that claims one of dests: as its cluster
// IP (any port: the caller checks the port against the Service's), as an external
// or load balancer address on that port and protocol, or, for a node address, as a
// node port. It reads the indexes the conflict checks keep, so its cost follows
// len(dests), not the number of Services; a claimant may have lost its claim, or
// not be in the last snapshot yet, which the caller's check against the snapshot's
// ports settles.
func (t *Tracker) ClaimantsOf(dests []Destination, out map[ServiceKey]struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range dests {
		p := slicePort{Protocol: d.Protocol, Port: d.Port}
		for _, k := range t.claims[d.Addr] {
			out[k] = struct{}{}
		}
		for _, k := range t.addrClaims[d.Addr][p] {
			out[k] = struct{}{}
		}
		if d.NodeAddr {
			for _, k := range t.portClaims[p] {
				out[k] = struct{}{}
			}
		}
	}
}
