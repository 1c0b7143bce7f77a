package nft

import (
	"hash/fnv"
	"sort"
	"strings"
)

// Ruleset is the complete desired content of one table. Fragments owned by different
// callers (one per Service, one for the fixed skeleton) are merged into it, and it
// remembers which chains and elements changed so that a diff costs O(what changed).
type Ruleset struct {
	Family Family
	Table  string
	Sets   map[string]*Set
	Chains map[string]*Chain

	elements map[string]Element
	elemRefs map[string]int
	owners   map[string]Fragment

	dirtyChains map[string]struct{}
	dirtyElems  map[string]struct{}
}

// Fragment is what one owner contributes: whole chains (owned exclusively) and
// elements (reference counted: two owners may add the same element).
type Fragment struct {
	Chains   []*Chain
	Elements []Element
}

// NewRuleset makes an empty ruleset for table family/name with the given sets.
func NewRuleset(family Family, table string, sets ...*Set) *Ruleset {
	r := &Ruleset{
		Family: family, Table: table,
		Sets:        map[string]*Set{},
		Chains:      map[string]*Chain{},
		elements:    map[string]Element{},
		elemRefs:    map[string]int{},
		owners:      map[string]Fragment{},
		dirtyChains: map[string]struct{}{},
		dirtyElems:  map[string]struct{}{},
	}
	for _, s := range sets {
		r.Sets[s.Name] = s
	}
	return r
}

// SetFragment replaces everything owner contributed with f. An empty fragment removes
// the owner.
func (r *Ruleset) SetFragment(owner string, f Fragment) {
	old := r.owners[owner]
	newChains := map[string]bool{}
	for _, c := range f.Chains {
		newChains[c.Name] = true
		if prev, ok := r.Chains[c.Name]; !ok || !chainsEqual(prev, c) {
			r.dirtyChains[c.Name] = struct{}{}
		}
		r.Chains[c.Name] = c
	}
	for _, c := range old.Chains {
		if !newChains[c.Name] {
			delete(r.Chains, c.Name)
			r.dirtyChains[c.Name] = struct{}{}
		}
	}
	// Add before removing so that an element kept by the owner never drops to zero.
	for _, e := range f.Elements {
		id := e.ID()
		r.elemRefs[id]++
		if prev, ok := r.elements[id]; !ok || !elementsEqual(prev, e) {
			r.dirtyElems[id] = struct{}{}
		}
		r.elements[id] = e
	}
	for _, e := range old.Elements {
		id := e.ID()
		if r.elemRefs[id]--; r.elemRefs[id] <= 0 {
			delete(r.elemRefs, id)
			delete(r.elements, id)
			r.dirtyElems[id] = struct{}{}
		}
	}
	if len(f.Chains) == 0 && len(f.Elements) == 0 {
		delete(r.owners, owner)
	} else {
		r.owners[owner] = f
	}
}

// Elements returns all elements, sorted by set then key.
func (r *Ruleset) Elements() []Element {
	out := make([]Element, 0, len(r.elements))
	for _, e := range r.elements {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

// Element returns the element with the given ID.
func (r *Ruleset) Element(id string) (Element, bool) {
	e, ok := r.elements[id]
	return e, ok
}

// takeDirty returns and clears the keys changed since the last call.
func (r *Ruleset) takeDirty() (chains, elems map[string]struct{}) {
	chains, elems = r.dirtyChains, r.dirtyElems
	r.dirtyChains, r.dirtyElems = map[string]struct{}{}, map[string]struct{}{}
	return chains, elems
}

// markAllDirty makes the next diff compare everything (full resync).
func (r *Ruleset) markAllDirty(v *View) {
	for n := range r.Chains {
		r.dirtyChains[n] = struct{}{}
	}
	for id := range r.elements {
		r.dirtyElems[id] = struct{}{}
	}
	for n := range v.Chains {
		r.dirtyChains[n] = struct{}{}
	}
	for id := range v.Elements {
		r.dirtyElems[id] = struct{}{}
	}
}

func chainsEqual(a, b *Chain) bool {
	if (a.Hook == nil) != (b.Hook == nil) || (a.Hook != nil && *a.Hook != *b.Hook) || len(a.Rules) != len(b.Rules) {
		return false
	}
	for i := range a.Rules {
		if a.Rules[i].String() != b.Rules[i].String() {
			return false
		}
	}
	return true
}

func elementsEqual(a, b Element) bool {
	if string(concatBytes(a.Data)) != string(concatBytes(b.Data)) || (a.Verdict == nil) != (b.Verdict == nil) {
		return false
	}
	return a.Verdict == nil || *a.Verdict == *b.Verdict
}

// String prints the rule as nft prints it.
func (r Rule) String() string {
	parts := make([]string, 0, len(r.Stmts)+1)
	for _, s := range r.Stmts {
		parts = append(parts, s.String())
	}
	if r.Comment != "" {
		parts = append(parts, `comment "`+r.Comment+`"`)
	}
	return strings.Join(parts, " ")
}

// Hash identifies a rule's content; it is stored in the rule's user data so that a
// restarted svcproxy can compare the kernel's rules with the desired ones without
// decoding expressions.
func (r Rule) Hash() uint64 {
	h := fnv.New64a()
	h.Write([]byte(r.String()))
	return h.Sum64()
}
