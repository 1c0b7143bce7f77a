package nft

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"
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
			var tab elementTable
			tab.reserve(tc.reserve)
			want := map[string]elementEntry{}
			for op := range tc.ops {
				id := fmt.Sprintf("set\x00%d", rng.IntN(tc.ids))
				if rng.Float64() < tc.putShare {
					e := elementEntry{owner: ownerRef(op), at: uint32(rng.IntN(1 << 20)), kernel: rng.Uint64()}
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
	var tab elementTable
	for i := range 100000 {
		tab.put(fmt.Sprint(i), elementEntry{at: uint32(i)})
	}
	big := len(tab.slots)
	for i := range 99000 {
		tab.del(fmt.Sprint(i))
	}
	// Churn on the 1000 left: new IDs fill deleted slots until a rehash.
	for i := range 200000 {
		tab.put(fmt.Sprint("n", i), elementEntry{})
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

// TestElementTablePutReplacesKey: the ruleset re-keys an entry into an owner's new
// arena by putting it under an equal ID string; the old string must not stay.
func TestElementTablePutReplacesKey(t *testing.T) {
	var tab elementTable
	old := string([]byte("set\x00key"))
	tab.put(old, elementEntry{at: 1})
	next := string([]byte("set\x00key"))
	tab.put(next, elementEntry{at: 2})
	for id := range tab.all() {
		if unsafe.StringData(id) != unsafe.StringData(next) {
			t.Fatalf("the table keeps the first key string after a put of an equal one")
		}
	}
}
