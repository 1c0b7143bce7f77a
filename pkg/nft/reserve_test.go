package nft

import (
	"fmt"
	"net/netip"
	"testing"
)

// TestReserveOwners: owners added after the reservation grow neither the list nor
// the map; a ruleset that holds many owners already is left as it is.
func TestReserveOwners(t *testing.T) {
	r := NewRuleset(FamilyIPv4, "t", &Set{Name: "ips", Key: []DataType{TypeIPv4Addr}})
	r.ReserveOwners(1000)
	owned := cap(r.owned)
	if owned < 1000 {
		t.Fatalf("cap(owned) = %d after ReserveOwners(1000)", owned)
	}
	for i := range 1000 {
		ip := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		r.SetFragment(fmt.Sprint("svc-", i), Fragment{Elements: []Element{{Set: "ips", Key: []Datum{IP(ip)}}}})
	}
	if cap(r.owned) != owned {
		t.Fatalf("the owners' list grew from %d to %d", owned, cap(r.owned))
	}
	before := r.owners
	r.ReserveOwners(2000) // holds 1000: not a cold start
	if cap(r.owned) != owned || fmt.Sprintf("%p", r.owners) != fmt.Sprintf("%p", before) {
		t.Fatalf("a ruleset that holds owners was resized")
	}
	if got := r.ElementCount(); got != 1000 {
		t.Fatalf("ElementCount = %d, want 1000", got)
	}
}
