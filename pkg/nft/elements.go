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

// setElements replaces owner's elements (IDs old) with elems and returns the new IDs
// and the conflicts elems take part in. An ID owner no longer adds goes to the next
// owner that does, or out of the table.
func (r *Ruleset) setElements(owner string, old []string, elems []Element) ([]string, []ElementConflict) {
	var conflicts []ElementConflict
	// An owner holds an ID once: the first of its versions.
	first := make(map[string]int, len(elems))
	uniq := elems[:0:0]
	for _, e := range elems {
		id := e.ID()
		if i, dup := first[id]; dup {
			if !elementsEqual(uniq[i], e) {
				conflicts = append(conflicts, ElementConflict{Winner: owner, Loser: owner, Kept: uniq[i], Dropped: e})
			}
			continue
		}
		first[id] = len(uniq)
		uniq = append(uniq, e)
	}
	for _, id := range old {
		if _, kept := first[id]; !kept {
			r.dropHolder(owner, id)
		}
	}
	ids := make([]string, len(uniq))
	for i, e := range uniq {
		entry := r.putHolder(owner, e)
		ids[i] = entry.id
		conflicts = append(conflicts, r.entryConflicts(entry, owner, r.contested[entry.id])...)
	}
	return ids, conflicts
}

// putHolder sets owner's version of e and marks the element changed if the value
// in effect changed.
func (r *Ruleset) putHolder(owner string, e Element) *elementEntry {
	id := e.ID()
	entry, ok := r.elements[id]
	switch {
	case !ok:
		entry = &elementEntry{owner: owner, id: id, value: r.valueOf(e)}
		r.elements[id] = entry
		r.countElement(e.Set, 1)
		r.markElem(owner, id)
	case entry.owner == owner:
		v := r.valueOf(e)
		if !entry.value.equal(v) {
			r.markElem(owner, entry.id)
		}
		entry.value = v
	case owner < entry.owner:
		prev := holder{owner: entry.owner, Element: r.elementOf(entry)}
		entry.owner, entry.value = owner, r.valueOf(e)
		r.contested[id] = insertHolder(r.contested[id], prev)
		if !elementsEqual(prev.Element, e) {
			r.markElem(owner, entry.id)
			r.markElem(prev.owner, entry.id)
		}
	default:
		r.contested[id] = insertHolder(r.contested[id], holder{owner: owner, Element: e})
	}
	return entry
}

// dropHolder removes owner's version of the element id; the next owner's value takes
// effect, or the element goes when nobody else adds it.
func (r *Ruleset) dropHolder(owner, id string) {
	entry := r.elements[id]
	if entry == nil {
		return
	}
	more := r.contested[id]
	if entry.owner != owner {
		r.setContested(id, slices.DeleteFunc(more, func(h holder) bool { return h.owner == owner }))
		return
	}
	if len(more) == 0 {
		delete(r.elements, id)
		r.countElement(setOfID(id), -1)
		r.markElem(owner, id)
		return
	}
	prev := entry.value
	entry.owner, entry.value = more[0].owner, r.valueOf(more[0].Element)
	r.setContested(id, more[1:])
	if !prev.equal(entry.value) {
		// Both owners' transactions carry the swap, so that it lands with either.
		r.markElem(owner, id)
		r.markElem(entry.owner, id)
	}
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
func (r *Ruleset) entryConflicts(entry *elementEntry, owner string, more []holder) []ElementConflict {
	if len(more) == 0 {
		return nil
	}
	kept := r.elementOf(entry)
	var out []ElementConflict
	for _, h := range more {
		if (owner == entry.owner || owner == h.owner) && !elementsEqual(h.Element, kept) {
			out = append(out, ElementConflict{Winner: entry.owner, Loser: h.owner, Kept: kept, Dropped: h.Element})
		}
	}
	return out
}

// Conflicts lists every element ID that owners currently render with different
// values, sorted by element, then losing owner.
func (r *Ruleset) Conflicts() []ElementConflict {
	var out []ElementConflict
	for _, id := range sortedKeys(r.contested) {
		entry := r.elements[id]
		out = append(out, r.entryConflicts(entry, entry.owner, r.contested[id])...)
	}
	return out
}
