package proxy

import (
	"errors"
	"net/netip"
	"slices"

	"github.com/svcproxy/svcproxy/pkg/conntrack"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// UDPClearer makes a ConntrackReconciler of a cleaner that can only delete the UDP
// entries of one Service address towards one endpoint address: it deletes those of
// endpoints that left Serving since its previous call. Unlike a real reconciler it
// cannot see entries made while svcproxy was down. It bridges until
// conntrack.(*Cleaner).Reconcile is in; then pass the Cleaner itself.
type UDPClearer struct {
	Cleaner interface {
		ClearUDP(service netip.AddrPort, endpoint netip.Addr) (uint, error)
	}
	last map[conntrack.Service][]netip.AddrPort
}

// Reconcile implements ConntrackReconciler.
func (u *UDPClearer) Reconcile(serving conntrack.Serving) (uint, error) {
	var deleted uint
	var errs []error
	for k, before := range u.last {
		after, ok := serving[k]
		for _, e := range before {
			if ok && slices.ContainsFunc(after, func(a netip.AddrPort) bool { return a.Addr() == e.Addr() }) {
				continue
			}
			n, err := u.Cleaner.ClearUDP(netip.AddrPortFrom(k.Addr, k.Port), e.Addr())
			deleted += n
			errs = append(errs, err)
		}
	}
	u.last = map[conntrack.Service][]netip.AddrPort{}
	for k, eps := range serving {
		if k.Proto == nft.ProtoUDP {
			u.last[k] = slices.Clone(eps)
		}
	}
	return deleted, errors.Join(errs...)
}
