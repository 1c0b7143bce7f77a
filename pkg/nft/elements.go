package nft

import (
	"fmt"
	"slices"
	"strings"
)

// ElementConflict is an element ID that two owners (or one owner twice) render with
// different values. Winner's value is in the table; Loser's is not.
type ElementConflict struct {
	Winner, Loser string
	Kept, Dropped Element
}

func (c ElementConflict) String() string {
	return fmt.Sprintf("element %s of %s: %s keeps %q, %s's %q is not used",
		joinData(c.Kept.Key), c.Kept.Set, c.Winner, c.Kept.String(), c.Loser, c.Dropped.String())
}

// setElements replaces the elements of the owner numbered ref (those of the arena
// old) with elems and returns the conflicts elems take part in. An ID the owner no
// longer adds goes to the next owner that does, or out of the table.
func (r *Ruleset) setElements(ref ownerRef, old elementArena, elems []Element) []ElementConflict {
	owner := r.owned[ref].name
	var conflicts []ElementConflict
	arena, spans := newArena(elems, r.spans)
	// An owner holds an ID once: the first of its versions. Most owners render a
	// dozen elements, all distinct: their spans are searched, without the map
	// per owner that, with the other per-element map operations, took a tenth of
	// a 100k cold sync's CPU.
	var first map[string]int // by ID, the index of its version in uniq
	uniq := elems
	if len(elems) > smallOwner || hasDuplicateID(spans) {
		first = make(map[string]int, len(elems))
		for k, e := range elems {
			id := spans[k].id
			if i, dup := first[id]; dup {
				if !elementsEqual(uniq[i], e) {
					conflicts = append(conflicts, ElementConflict{Winner: owner, Loser: owner, Kept: uniq[i].clone(), Dropped: e.clone()})
				}
				if len(uniq) == len(elems) { // the first duplicate: from here on a copy
					uniq = append(make([]Element, 0, len(elems)), elems[:k]...)
				}
				continue
			}
			first[id] = len(first)
			if len(uniq) < len(elems) {
				uniq = append(uniq, e)
			}
		}
	}
	if len(uniq) < len(elems) {
		// Rare (a renderer's bug, reported above): the arena holds each ID once.
		arena, spans = newArena(uniq, spans)
	}
	r.spans = spans[:0] // reused by the next owner
	kept := func(id string) bool {
		if first != nil {
			_, ok := first[id]
			return ok
		}
		return slices.ContainsFunc(spans, func(s arenaSpan) bool { return s.id == id })
	}
	// The new arena goes beside the old one, whose records the entries not moved
	// yet point at (owned); the old one goes once every entry has moved.
	prev := r.owned[ref].cur
	next := 1 - prev
	r.owned[ref].arenas[next] = arena
	for id := range old.ids() {
		if !kept(id) {
			r.dropHolder(ref, id)
		}
	}
	// A new owner's elements are all marked at once, not one map entry each (a cold
	// start marks every element); marking one whose value is not in effect only
	// makes the plan compare it.
	whole := old == "" && len(uniq) > 0
	if whole {
		r.markWhole(owner, arena)
	}
	var added setRun
	for i, e := range uniq {
		if r.putHolder(ref, next, spans[i], e, !whole) {
			added.count(r, e.Set)
		}
	}
	added.flush(r)
	r.owned[ref].arenas[prev], r.owned[ref].cur = "", next
	for i := range uniq {
		id := spans[i].id
		if more := r.contested[id]; len(more) > 0 {
			if cs := r.entryConflicts(id, r.elements.getOrZero(id), owner, more); len(cs) > 0 {
				conflicts = append(conflicts, cs...)
				r.touch(id)
			}
		}
	}
	return conflicts
}

// smallOwner is the element count up to which an owner's IDs are searched
// rather than mapped (setElements).
const smallOwner = 32

// hasDuplicateID reports whether two spans have one ID.
func hasDuplicateID(spans []arenaSpan) bool {
	for i := range spans {
		for j := range i {
			if spans[i].id == spans[j].id {
				return true
			}
		}
	}
	return false
}

// setRun counts the elements added to one set in a run, so that the ruleset's
// count per set (countElement) changes once a run, not once an element.
type setRun struct {
	set string
	n   int
}

func (s *setRun) count(r *Ruleset, set string) {
	if set != s.set {
		s.flush(r)
		s.set = set
	}
	s.n++
}

func (s *setRun) flush(r *Ruleset) {
	if s.n > 0 {
		r.countElement(s.set, s.n)
	}
	s.n = 0
}

// putHolder sets the version of e (whose ID and value are at, in the owner's new
// arena, number arena of its owned.arenas) of the owner ref and marks the element
// changed if the value in effect changed (the owner's own mark only if mark: see
// setElements). It reports whether the ruleset did not hold the ID, for the
// caller to count it (countElement). An entry whose value is the owner's points
// at the new arena, so no entry keeps the owner's previous arena alive.
func (r *Ruleset) putHolder(ref ownerRef, arena uint8, at arenaSpan, e Element, mark bool) (added bool) {
	owner, id := r.owned[ref].name, at.id
	entry, ok := r.elements.get(id)
	switch {
	case !ok:
		entry = elementEntry{owner: ref}
		entry.setRecord(arena, at.off)
		r.takeHash(id, &entry)
		r.elements.put(id, entry)
		r.keepUndeclared(id, e)
		if mark {
			r.markElem(owner, id)
		}
		return true
	case entry.owner == ref:
		// The entry still points at the owner's previous arena.
		if mark && r.valueOf(entry) != at.val {
			r.markElem(owner, id)
		}
		entry.setRecord(arena, at.off)
		r.elements.put(id, entry)
		r.keepUndeclared(id, e)
	case owner < r.owned[entry.owner].name:
		prev := holder{owner: r.owned[entry.owner].name, val: r.valueOf(entry), undeclared: r.undeclared[id]}
		entry.owner = ref
		entry.setRecord(arena, at.off)
		r.elements.put(id, entry)
		r.keepUndeclared(id, e)
		r.contested[id] = insertHolder(r.contested[id], prev)
		if !sameValue(prev.val, at.val) {
			if mark {
				r.markElem(owner, id)
			}
			r.markElem(prev.owner, id)
		}
	default:
		h := holder{owner: owner, val: at.val}
		if _, declared := r.Sets[e.Set]; !declared {
			kept := e.clone()
			h.undeclared = &kept
		}
		r.contested[id] = insertHolder(r.contested[id], h)
	}
	return false
}

// dropHolder removes owner's version of the element id; the next owner's value takes
// effect, or the element goes when nobody else adds it.
func (r *Ruleset) dropHolder(ref ownerRef, id string) {
	entry, ok := r.elements.get(id)
	if !ok {
		return
	}
	owner := r.owned[ref].name
	more := r.contested[id]
	if entry.owner != ref {
		r.setContested(id, slices.DeleteFunc(more, func(h holder) bool { return h.owner == owner }))
		r.touch(id)
		return
	}
	if len(more) > 0 && r.handOver(owner, id, entry, more) {
		return
	}
	// Nobody else adds it (or, which cannot be, the next owner's arena lacks it,
	// and the entry cannot point at a record that owner does not have).
	r.setContested(id, nil)
	r.leaveHash(id, entry)
	r.elements.del(id)
	delete(r.undeclared, id)
	r.countElement(setOfID(id), -1)
	r.markElem(owner, id)
}

// handOver gives the element id, whose entry owner lets go, to the next owner in
// more, and reports whether that owner is numbered and its arena holds it (it
// always should).
func (r *Ruleset) handOver(owner, id string, entry elementEntry, more []holder) bool {
	prev := r.valueOf(entry)
	// The next owner renders id, so it has a number and its arena holds it: the
	// entry is keyed and valued from there, not from the arena of the owner
	// letting go.
	next, numbered := r.owners[more[0].owner]
	if !numbered {
		return false
	}
	nextOwned := &r.owned[next]
	nextID, off, found := nextOwned.elements().find(id)
	if !found {
		return false
	}
	entry.owner = next
	entry.setRecord(nextOwned.cur, off)
	r.elements.put(nextID, entry)
	if more[0].undeclared != nil {
		r.undeclared[id] = more[0].undeclared
	}
	r.setContested(id, more[1:])
	r.touch(id) // the next owner may differ from those after it
	if prev != r.valueOf(entry) {
		// Both owners' transactions carry the swap, so that it lands with either.
		r.markElem(owner, id)
		r.markElem(more[0].owner, id)
	}
	return true
}

// setContested records the versions not in effect for id; none ends the contest.
func (r *Ruleset) setContested(id string, more []holder) {
	if len(more) == 0 {
		delete(r.contested, id)
		return
	}
	r.contested[id] = more
}

// insertHolder puts h into hs, which is sorted by owner, replacing owner's version.
func insertHolder(hs []holder, h holder) []holder {
	i, found := slices.BinarySearchFunc(hs, h.owner, func(x holder, o string) int { return strings.Compare(x.owner, o) })
	if found {
		hs[i] = h
		return hs
	}
	return slices.Insert(hs, i, h)
}

// conflicts lists the owners whose version differs from the one in effect, as seen
// by owner: all of them when owner is in effect, else owner itself.
func (r *Ruleset) entryConflicts(id string, entry elementEntry, owner string, more []holder) []ElementConflict {
	if len(more) == 0 {
		return nil
	}
	kept, winner := r.valueOf(entry), r.owned[entry.owner].name
	var out []ElementConflict
	for _, h := range more {
		if (owner == winner || owner == h.owner) && !sameValue(h.val, kept) {
			out = append(out, ElementConflict{Winner: winner, Loser: h.owner, Kept: r.elementOf(id, entry), Dropped: r.holderElement(id, h)})
		}
	}
	return out
}

// holderElement rebuilds the element id of holder h.
func (r *Ruleset) holderElement(id string, h holder) Element {
	if h.undeclared != nil {
		return *h.undeclared
	}
	return r.decodeElement(id, h.val)
}

// sameValue reports whether two encoded values are the same to the kernel: as
// elementsEqual, the timeout aside.
func sameValue(a, b string) bool {
	if a == b {
		return true
	}
	x, y := splitValue(a), splitValue(b)
	x.timeout, y.timeout = 0, 0
	return x == y
}

// touch records that the contest of id changed, if it still has one (see
// TakeConflicts).
func (r *Ruleset) touch(id string) {
	if len(r.contested[id]) == 0 {
		return
	}
	if r.touched == nil {
		r.touched = map[string]struct{}{}
	}
	r.touched[id] = struct{}{}
}

// TakeConflicts lists the conflicts, as Conflicts does, of the element IDs whose
// contest the SetFragment calls since the last TakeConflicts changed: those that
// outlive a batch of changes, without the transient ones (a key handed over from
// one owner to another within the batch). It costs what the batch changed.
func (r *Ruleset) TakeConflicts() []ElementConflict {
	if len(r.touched) == 0 {
		return nil
	}
	var out []ElementConflict
	for _, id := range sortedKeys(r.touched) {
		if more := r.contested[id]; len(more) > 0 {
			entry := r.elements.getOrZero(id)
			out = append(out, r.entryConflicts(id, entry, r.owned[entry.owner].name, more)...)
		}
	}
	r.touched = nil
	return out
}

// Conflicts lists every element ID that owners currently render with different
// values, sorted by element, then losing owner. It walks every element more than
// one owner adds: for tests; the sync loop asks TakeConflicts.
func (r *Ruleset) Conflicts() []ElementConflict {
	var out []ElementConflict
	for _, id := range sortedKeys(r.contested) {
		entry := r.elements.getOrZero(id)
		out = append(out, r.entryConflicts(id, entry, r.owned[entry.owner].name, r.contested[id])...)
	}
	return out
}

// ownerRef is an owner's number in the ruleset's element entries: 4 bytes instead
// of a 16-byte string header in each of hundreds of thousands of entries.
type ownerRef uint32

// ownerRef returns owner's number, giving it one (a free one first) if it has
// none.
func (r *Ruleset) ownerRef(owner string) ownerRef {
	if ref, ok := r.owners[owner]; ok {
		return ref
	}
	var ref ownerRef
	if n := len(r.freeRefs); n > 0 {
		ref, r.freeRefs = r.freeRefs[n-1], r.freeRefs[:n-1]
	} else {
		ref = ownerRef(len(r.owned))
		r.owned = append(r.owned, owned{})
	}
	r.owned[ref] = owned{name: owner}
	r.owners[owner] = ref
	return ref
}

// releaseOwnerRef frees the number of an owner gone: no element entry names it
// any more.
func (r *Ruleset) releaseOwnerRef(owner string) {
	ref, ok := r.owners[owner]
	if !ok {
		return
	}
	delete(r.owners, owner)
	r.owned[ref] = owned{}
	r.freeRefs = append(r.freeRefs, ref)
}
