package conntrack

import "net/netip"

// Service is one Service address as clients reach it: protocol (IPPROTO_UDP,
// IPPROTO_SCTP, ...), address and port. The conntrack reconciler keys what may stay
// in the table by it.
type Service struct {
	Proto uint8
	Addr  netip.Addr
	Port  uint16
}

// Serving maps each Service address svcproxy programs to the endpoints (address and
// port) its connections may be translated to. Entries towards a Service address
// whose reply source is not among them are stale.
type Serving map[Service][]netip.AddrPort
