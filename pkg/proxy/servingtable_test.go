package proxy

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/svcproxy/svcproxy/pkg/conntrack"
)

// TestServingTableHandOver: a key one owner gives up and another takes in the same
// commit stays served by the new owner, in whichever order the commit meets them
// (Go's map order is random: 50 rounds see both).
func TestServingTableHandOver(t *testing.T) {
	k := conntrack.Service{Proto: 17, Addr: netip.MustParseAddr("192.0.2.10"), Port: 53}
	old := []netip.AddrPort{netip.MustParseAddrPort("10.244.1.1:53")}
	next := []netip.AddrPort{netip.MustParseAddrPort("10.244.2.2:53")}
	for range 50 {
		s := newServingTable()
		s.render("svc/a", conntrack.Serving{k: old})
		s.commit(nil)
		s.render("svc/a", nil)
		s.render("svc/b", conntrack.Serving{k: next})
		s.commit(nil)
		if got := s.serving[k]; !slices.Equal(got, next) {
			t.Fatalf("after the hand-over %v serves %v, want %v", k, got, next)
		}
		if !s.changed[k] {
			t.Fatalf("%v not marked changed", k)
		}
	}
}
