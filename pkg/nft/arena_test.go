package nft

import (
	"slices"
	"testing"
	"unsafe"
)

func TestArenaRoundTrip(t *testing.T) {
	elems := []Element{
		{Set: "ips", Key: []Datum{ip("10.96.0.1")}},
		{Set: "pairs", Key: []Datum{ip("10.244.0.1"), ip("10.244.0.2")}},
		{Set: "long", Key: slices.Repeat([]Datum{ip("2001:db8::1")}, 10), Data: []Datum{ip("10.0.0.1"), Port(80)}}, // an ID over 127 bytes
	}
	arena, spans := newArena(elems, nil)
	var got []string
	for id := range arena.ids() {
		got = append(got, id)
	}
	for i, e := range elems {
		if spans[i].id != e.ID() || spans[i].val != encodeValue(&e) || arena.valueAt(spans[i].off) != spans[i].val {
			t.Errorf("span %d = %q/%q at %d, want %q/%q", i, spans[i].id, spans[i].val, spans[i].off, e.ID(), encodeValue(&e))
		}
		var back Element
		decodeValue(&Set{Data: []DataType{TypeIPv4Addr, TypeInetService}}, spans[i].val, &back)
		if len(e.Data) > 0 && !slices.Equal(back.Data, e.Data) {
			t.Errorf("span %d decodes to data %v, want %v", i, back.Data, e.Data)
		}
		if i >= len(got) || got[i] != e.ID() {
			t.Errorf("ids() = %q, want %q at %d", got, e.ID(), i)
		}
	}
	if len(got) != len(elems) {
		t.Fatalf("ids() yields %d IDs, want %d", len(got), len(elems))
	}
}

// TestEntriesFollowTheOwnersNewArena: after an owner renders again, every entry
// whose value is its own is keyed and valued from the new arena, so the old one is
// garbage; an entry another owner wins stays the winner's.
func TestEntriesFollowTheOwnersNewArena(t *testing.T) {
	r := newTestRuleset()
	r.SetFragment("a", svcFragment("svc-a", "10.96.0.1", "10.244.1.1", "10.244.1.2"))
	r.SetFragment("b", svcFragment("svc-b", "10.96.0.2", "10.244.1.1")) // shares a pair with a
	r.SetFragment("a", svcFragment("svc-a", "10.96.0.1", "10.244.1.1", "10.244.1.2"))
	r.SetFragment("b", svcFragment("svc-b", "10.96.0.2", "10.244.1.1", "10.244.1.3"))
	within := func(s string, a elementArena) bool {
		p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(string(a))))
		return p >= lo && p+uintptr(len(s)) <= lo+uintptr(len(a))
	}
	for id, e := range r.elements.all() {
		o := r.owned[e.owner]
		owner, arena := o.name, o.elements()
		if !within(id, arena) {
			t.Errorf("entry %q (owner %s) is keyed outside its owner's arena", id, owner)
		}
		if e.owner != r.owners[owner] || o.arenas[e.arena()] != arena {
			t.Errorf("entry %q: owner %s's arena is not the one its number names", id, owner)
		}
		if got, ok := r.Element(id); !ok || got.ID() != id {
			t.Errorf("entry %q reads back as %v", id, got)
		}
	}
	if got := r.elements.len(); got != 7 {
		t.Fatalf("%d entries, want 7", got)
	}
}

// TestEntrySize: the entry of each of the hundreds of thousands of elements is two
// words (the owner, and its record's offset with the arena bit and the kernel flag;
// the kernel's value hash).
func TestEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(elementEntry{}); n != 16 {
		t.Fatalf("elementEntry is %d bytes, want 16", n)
	}
}
