package proxy

import (
	"encoding/binary"
	"net/netip"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// lastRendering is where a Service's renderer finds its last rendering: owner's
// fragment in rules (nft.Ruleset.LastData); a zero one knows none.
type lastRendering struct {
	rules *nft.Ruleset
	owner string
}

// slotElements adds one port's part of the endpoints map set to f: key . slot :
// endpoint . port, the slots from first on, each endpoint of eps keeping the slot
// it held in last (keepSlots).
func slotElements(f *nft.Fragment, set string, key []nft.Datum, first int, eps []endpoints.Endpoint, last lastRendering) {
	for i, e := range keepSlots(eps, last.slots(set, key, first)) {
		f.Elements = append(f.Elements, nft.Element{Set: set, Key: f.Concat(key, nft.Int(uint32(first+i))),
			Data: f.Datums(nft.IP(e.Addr()), nft.Port(e.Port))})
	}
}

// slots reads which endpoint each slot of set under key held, from slot first on,
// until the first one missing (slots are dense). Nil when none is known.
func (last lastRendering) slots(set string, key []nft.Datum, first int) []netip.AddrPort {
	if last.rules == nil {
		return nil
	}
	var out []netip.AddrPort
	for rest, data := range last.rules.LastData(last.owner, set, key) {
		if len(rest) != 1 || len(data) != 2 {
			continue
		}
		b := rest[0].Bytes()
		if len(b) != 4 || int(binary.NativeEndian.Uint32(b)) != first+len(out) {
			continue // another part of the map (local slots), or past a gap
		}
		out = append(out, addrPortOf(data))
	}
	return out
}

// keepSlots orders a port's endpoints (sorted, without duplicates) for the slots
// of its endpoints map: an endpoint that held a slot below len(eps) keeps it, and
// the others fill the free slots in their order. A port's slots follow its
// endpoints' order otherwise, so one pod replaced by another moved every endpoint
// between the two addresses to a new slot, a deletion and an addition of a map
// element each: on make bench's shared shape, under churn, 16 objects a changed
// Service and most of the transactions (a Service with 1,000 endpoints rewrote
// hundreds). Now a replacement rewrites one slot and a removal two (the last
// endpoint moves into the hole). Without a last rendering (had empty) the order
// is eps itself, which is also what a cold start renders.
func keepSlots(eps []endpoints.Endpoint, had []netip.AddrPort) []endpoints.Endpoint {
	if len(had) == 0 {
		return eps
	}
	at := make(map[netip.AddrPort]int, len(eps))
	for i, e := range eps {
		at[e.AddrPort()] = i
	}
	out := make([]endpoints.Endpoint, len(eps))
	filled := make([]bool, len(eps))
	placed := make([]bool, len(eps))
	for slot, ap := range had[:min(len(had), len(eps))] {
		if i, ok := at[ap]; ok && !placed[i] {
			out[slot], filled[slot], placed[i] = eps[i], true, true
		}
	}
	next := 0
	for slot := range out {
		if filled[slot] {
			continue
		}
		for placed[next] {
			next++
		}
		out[slot], placed[next] = eps[next], true
	}
	return out
}
