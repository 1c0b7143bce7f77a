package conntrack

import "net/netip"

// Entry is what the reconciler needs of one conntrack entry: the original tuple (as
// the client sent it) and the reply tuple's source (where the kernel translated the
// destination to), plus what identifies the entry for deletion.
type Entry struct {
	Family   uint8 // AF_INET or AF_INET6
	Proto    uint8 // IPPROTO_UDP, IPPROTO_SCTP, ...
	OrigSrc  netip.AddrPort
	OrigDst  netip.AddrPort
	ReplySrc netip.AddrPort
	Zone     uint16
	// Status is the entry's IPS_* bits (CTA_STATUS).
	Status uint32
	// ID is the kernel's id of the entry; a delete that carries it cannot remove a
	// newer entry with the same tuple.
	ID    uint32
	HasID bool
}

// index is Serving prepared for lookups: every Service's endpoints as a set, all
// addresses unmapped so that 4-in-6 forms compare equal.
type index map[Service]map[netip.AddrPort]struct{}

func newIndex(s Serving) index {
	ix := make(index, len(s))
	for svc, eps := range s {
		svc.Addr = svc.Addr.Unmap()
		set := ix[svc]
		if set == nil {
			set = make(map[netip.AddrPort]struct{}, len(eps))
			ix[svc] = set
		}
		for _, ep := range eps {
			set[unmap(ep)] = struct{}{}
		}
	}
	return ix
}

// stale reports whether e must be deleted: it goes to a Service address in the
// index and its reply does not come from one of that Service's endpoints. That
// covers entries translated to an endpoint that is gone and entries that were never
// translated (reply source == the Service address, created before the rules
// existed). Entries towards anything else are other programs' flows: never stale.
func (ix index) stale(e Entry) bool {
	eps, ok := ix[Service{Proto: e.Proto, Addr: e.OrigDst.Addr().Unmap(), Port: e.OrigDst.Port()}]
	if !ok {
		return false
	}
	_, serving := eps[unmap(e.ReplySrc)]
	return !serving
}

func unmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
