package nft

import (
	"hash/maphash"
	"iter"
	"math/bits"
)

// elementTable holds the ruleset's element entries by ID: an open-addressing hash
// table with linear probing, one slot array and one byte of hash per slot.
//
// Why not a Go map: at 30k Services on the shared bench shape the map of ~490k
// entries (32 bytes a slot) took 38.5 MiB of live heap, 0.47 load: a Go map's
// tables hold 1024 slots, the size hint and the splits round to powers of two, and
// each table's 33 KiB of groups is a 40 KiB allocation. This table is sized to the
// entries (at most 7/8 full, rehashed to 0.7 when it fills), and it shrinks when
// entries go, which a Go map never does.
//
// A slot holds the entry alone: the ID is read from the owner's arena the entry
// points into (idOf), so each slot is 16 bytes and a tag instead of 32 and a tag
// (10 MiB of the live heap at 30k Services on the shared bench shape).
type elementTable struct {
	tags  []uint8 // per slot: slotEmpty, slotDeleted, or 0x80 | 7 bits of the ID's hash
	slots []elementEntry
	live  int // slots holding an entry
	dead  int // slots marked deleted
	// moves counts the changes that may give a slot another ID or move the
	// entries (a new ID, a deletion, a resize): a pointer from ref stays the
	// entry of its ID while it does not change.
	moves uint64
	// idOf is the ID of an entry (Ruleset.idOf). Every entry put must give back the
	// ID it was put under for as long as it is in the table.
	idOf func(elementEntry) string
}

const (
	slotEmpty   = 0
	slotDeleted = 1
)

var elementSeed = maphash.MakeSeed()

// The tag takes the hash's low bits: home takes its high ones, so that neighbours
// in a run do not share their tags.
func slotTag(h uint64) uint8 { return uint8(h) | 0x80 }

func (t *elementTable) home(h uint64) int {
	hi, _ := bits.Mul64(h, uint64(len(t.slots)))
	return int(hi)
}

func (t *elementTable) len() int { return t.live }

// index is the slot holding id, or -1.
func (t *elementTable) index(id string) int {
	if t.live == 0 {
		return -1
	}
	h := maphash.String(elementSeed, id)
	tag, n := slotTag(h), len(t.slots)
	for i := t.home(h); ; {
		switch t.tags[i] {
		case slotEmpty:
			return -1
		case tag:
			if t.idOf(t.slots[i]) == id {
				return i
			}
		}
		if i++; i == n {
			i = 0
		}
	}
}

func (t *elementTable) get(id string) (elementEntry, bool) {
	if i := t.index(id); i >= 0 {
		return t.slots[i], true
	}
	return elementEntry{}, false
}

func (t *elementTable) has(id string) bool { return t.index(id) >= 0 }

// put sets id's entry, which must point at id's record (idOf). Only a put of a new
// ID may rehash.
func (t *elementTable) put(id string, e elementEntry) {
	h := maphash.String(elementSeed, id)
	tag, n := slotTag(h), len(t.slots)
	free := -1
	for i := t.home(h); n > 0; {
		switch t.tags[i] {
		case slotEmpty:
			if free < 0 {
				free = i
			}
			n = 0 // not held: insert it
			continue
		case slotDeleted:
			if free < 0 {
				free = i
			}
		case tag:
			if t.idOf(t.slots[i]) == id {
				t.slots[i] = e
				return
			}
		}
		if i++; i == n {
			i = 0
		}
	}
	switch {
	case free >= 0 && t.tags[free] == slotDeleted:
		t.dead--
	case (t.live+t.dead+1)*8 > len(t.slots)*7:
		t.rehash(t.live + 1)
		t.insertNew(h, e)
		return
	}
	t.tags[free], t.slots[free] = tag, e
	t.live++
	t.moves++
}

// del removes id's entry, if any.
func (t *elementTable) del(id string) {
	i := t.index(id)
	if i < 0 {
		return
	}
	t.slots[i] = elementEntry{}
	t.live--
	t.moves++
	// A slot before an empty one ends no run: it can be empty too, and so can the
	// deleted ones before it.
	n := len(t.slots)
	if t.tags[(i+1)%n] != slotEmpty {
		t.tags[i] = slotDeleted
		t.dead++
		return
	}
	t.tags[i] = slotEmpty
	for j := (i + n - 1) % n; t.tags[j] == slotDeleted; j = (j + n - 1) % n {
		t.tags[j] = slotEmpty
		t.dead--
	}
	if n > 64 && t.live*8 < n { // under 1/8 full: give the memory back
		t.rehash(t.live)
	}
}

// reserve sizes an empty table for about n entries.
func (t *elementTable) reserve(n int) {
	if t.live == 0 && t.dead == 0 && n > 0 {
		t.resize(n*20/17 + 1) // 0.85 full at n
	}
}

// rehash moves the entries into a table 0.7 full when it holds need entries:
// larger when the table filled up, as large or smaller when deleted slots did.
func (t *elementTable) rehash(need int) {
	t.resize(max(need*10/7+1, 8))
}

func (t *elementTable) resize(capacity int) {
	old, oldTags := t.slots, t.tags
	t.moves++
	t.slots, t.tags = make([]elementEntry, capacity), make([]uint8, capacity)
	t.live, t.dead = 0, 0
	for i, tag := range oldTags {
		if tag >= 0x80 {
			t.insertNew(maphash.String(elementSeed, t.idOf(old[i])), old[i])
		}
	}
}

// insertNew puts e, whose ID hashes to h, into a table that has room and does not
// hold its ID.
func (t *elementTable) insertNew(h uint64, e elementEntry) {
	n := len(t.slots)
	i := t.home(h)
	for t.tags[i] != slotEmpty {
		if i++; i == n {
			i = 0
		}
	}
	t.tags[i], t.slots[i] = slotTag(h), e
	t.live++
}

// all yields every ID and its entry. The loop may put entries of IDs the table
// holds and delete any; a put of a new ID may or may not be seen.
func (t *elementTable) all() iter.Seq2[string, elementEntry] {
	return func(yield func(string, elementEntry) bool) {
		slots, tags := t.slots, t.tags
		for i := range tags {
			if tags[i] >= 0x80 && !yield(t.idOf(slots[i]), slots[i]) {
				return
			}
		}
	}
}

// getOrZero is id's entry, or the zero entry, as a Go map's index expression.
func (t *elementTable) getOrZero(id string) elementEntry {
	e, _ := t.get(id)
	return e
}

// ref is id's entry, in place, or nil: a change through it needs no second
// lookup (View.setHash, for every element a transaction adds). Valid while moves
// does not change.
func (t *elementTable) ref(id string) *elementEntry {
	if i := t.index(id); i >= 0 {
		return &t.slots[i]
	}
	return nil
}

// each calls fn with every entry, in place, in memory order (View.Forget).
func (t *elementTable) each(fn func(*elementEntry)) {
	for i := range t.tags {
		if t.tags[i] >= 0x80 {
			fn(&t.slots[i])
		}
	}
}
