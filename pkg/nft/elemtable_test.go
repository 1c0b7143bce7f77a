package nft

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestElementTableAgainstMap runs random puts and deletes on the table and on a Go
// map and requires the same entries after each step, the churn of a long-running
// proxy included (deleted slots reused, rehashes that grow and shrink).
func TestElementTableAgainstMap(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ids      int // distinct IDs drawn from
		ops      int
		putShare float64
		reserve  int
	}{
		{name: "small", ids: 10, ops: 2000, putShare: 0.6},
		{name: "grows", ids: 5000, ops: 20000, putShare: 0.9},
		{name: "churn", ids: 3000, ops: 60000, putShare: 0.5},
		{name: "drains", ids: 2000, ops: 20000, putShare: 0.3},
		{name: "reserved", ids: 4000, ops: 20000, putShare: 0.8, reserve: 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tc.ids)))
			names := make([]string, tc.ids)
			for i := range names {
				names[i] = fmt.Sprintf("set\x00%d", i)
			}
			tab := elementTable{idOf: func(e elementEntry) string { return names[e.owner] }}
			tab.reserve(tc.reserve)
			want := map[string]elementEntry{}
			for op := range tc.ops {
				k := rng.IntN(tc.ids)
				id := names[k]
				if rng.Float64() < tc.putShare {
					e := elementEntry{owner: ownerRef(k), at: uint32(rng.IntN(1 << 20)), kernel: rng.Uint64()}
					tab.put(id, e)
					want[id] = e
				} else {
					tab.del(id)
					delete(want, id)
				}
				if tab.len() != len(want) {
					t.Fatalf("op %d: len %d, want %d", op, tab.len(), len(want))
				}
				got, ok := tab.get(id)
				if w, wok := want[id]; ok != wok || got != w {
					t.Fatalf("op %d: get(%q) = %v %v, want %v %v", op, id, got, ok, w, wok)
				}
				if len(tab.slots) > 0 && tab.live+tab.dead >= len(tab.slots) {
					t.Fatalf("op %d: no empty slot left (%d live, %d deleted, %d slots): a miss would never end", op, tab.live, tab.dead, len(tab.slots))
				}
			}
			seen := map[string]elementEntry{}
			for id, e := range tab.all() {
				if _, dup := seen[id]; dup {
					t.Fatalf("all() yields %q twice", id)
				}
				seen[id] = e
			}
			if fmt.Sprint(seen) != fmt.Sprint(want) {
				t.Fatalf("all() = %d entries, want %d; differ", len(seen), len(want))
			}
			for i := range tc.ids {
				id := fmt.Sprintf("set\x00%d", i)
				_, want := want[id]
				if tab.has(id) != want {
					t.Fatalf("has(%q) = %v, want %v", id, !want, want)
				}
			}
		})
	}
}

// TestElementTableShrinks: a Go map never gives back the memory of entries that
// went; the table does at its next rehash.
func TestElementTableShrinks(t *testing.T) {
	var names []string
	tab := elementTable{idOf: func(e elementEntry) string { return names[e.owner] }}
	put := func(id string, at uint32) {
		names = append(names, id)
		tab.put(id, elementEntry{owner: ownerRef(len(names) - 1), at: at})
	}
	for i := range 100000 {
		put(fmt.Sprint(i), uint32(i))
	}
	big := len(tab.slots)
	for i := range 99000 {
		tab.del(fmt.Sprint(i))
	}
	// Churn on the 1000 left: new IDs fill deleted slots until a rehash.
	for i := range 200000 {
		put(fmt.Sprint("n", i), 0)
		tab.del(fmt.Sprint("n", i))
	}
	if len(tab.slots) >= big/10 {
		t.Fatalf("%d slots for %d entries after the churn (%d at 100000 entries): the table did not shrink", len(tab.slots), tab.len(), big)
	}
	for i := 99000; i < 100000; i++ {
		if e, ok := tab.get(fmt.Sprint(i)); !ok || e.at != uint32(i) {
			t.Fatalf("entry %d lost or changed: %v %v", i, e, ok)
		}
	}
}

// TestReRenderMovesEveryEntry: the table reads IDs from the owners' arenas, so
// after each SetFragment every entry must point into its owner's current arena
// (none into one being replaced, which would also keep it alive) and give back its
// ID; contested IDs handed from owner to owner included.
func TestReRenderMovesEveryEntry(t *testing.T) {
	r := newTestRuleset()
	frag := func(from, to int) Fragment {
		var f Fragment
		for i := from; i < to; i++ {
			f.Elements = append(f.Elements, Element{Set: "ips", Key: []Datum{IP(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}))}})
		}
		return f
	}
	check := func(step string) {
		t.Helper()
		n := 0
		for id, e := range r.elements.all() {
			n++
			o := r.owned[e.owner]
			if o.arenas[e.arena()] != o.elements() || o.arenas[1-o.cur] != "" {
				t.Fatalf("%s: entry of %q points into a replaced arena of %s", step, id, o.name)
			}
			if got, ok := r.elements.get(id); !ok || got != e {
				t.Fatalf("%s: %q not found by its own ID", step, id)
			}
		}
		if n != r.ElementCount() {
			t.Fatalf("%s: all() yields %d entries, the count is %d", step, n, r.ElementCount())
		}
	}
	r.SetFragment("b", frag(0, 300))
	r.SetFragment("a", frag(200, 500)) // takes 200-299 over: "a" < "b"
	check("a over b")
	r.SetFragment("a", frag(250, 600)) // 200-249 go back to b
	check("a re-rendered")
	r.SetFragment("b", frag(0, 260))
	check("b re-rendered")
	r.SetFragment("a", Fragment{}) // 250-259 back to b, the rest gone
	check("a removed")
	if got := r.ElementCount(); got != 260 {
		t.Fatalf("%d elements, want b's 260", got)
	}
}
