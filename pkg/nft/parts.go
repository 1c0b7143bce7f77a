package nft

import (
	"strings"
)

// Parts names the parts of a table that another program changed, as the kernel's
// notifications name them (WatchForeign), so that a repair reads back and compares
// only those (ReadParts, View.ReplaceParts, Ruleset.MarkPartsDirty) rather than
// the whole table: at 10k Services a whole read took 0.36-0.8 s, and comparing
// everything as much again.
type Parts struct {
	// All: what changed is not known by name (notifications were lost, or an
	// object other than a table, chain, rule, set or element changed): only a
	// read of the whole table finds it.
	All bool
	// Unwatched: All because notifications were paused for a big write of ours
	// (NotifyGate), not because any were lost.
	Unwatched bool
	// Table: the table itself was added or deleted, or its flags changed. Deleting
	// a table notifies the deletion of each chain, rule and set in it too, so
	// those are named as well.
	Table  bool
	Chains map[string]bool // chains added, deleted, or whose rules changed
	Sets   map[string]bool // sets added, deleted, or whose elements changed
}

// Empty reports whether p names nothing.
func (p Parts) Empty() bool { return !p.All && !p.Table && len(p.Chains) == 0 && len(p.Sets) == 0 }

// Add adds what o names to p.
func (p *Parts) Add(o Parts) {
	p.All = p.All || o.All
	p.Table = p.Table || o.Table
	for name := range o.Chains {
		p.addChain(name)
	}
	for name := range o.Sets {
		p.addSet(name)
	}
}

func (p *Parts) addChain(name string) {
	if p.Chains == nil {
		p.Chains = map[string]bool{}
	}
	p.Chains[name] = true
}

func (p *Parts) addSet(name string) {
	if p.Sets == nil {
		p.Sets = map[string]bool{}
	}
	p.Sets[name] = true
}

// inSets returns whether an element ID belongs to one of the named sets: a set's
// code is a uvarint, so no code is another's prefix.
func inSets(sets map[string]bool) func(id string) bool {
	prefixes := make([]string, 0, len(sets))
	for name := range sets {
		prefixes = append(prefixes, idPrefix(name))
	}
	return func(id string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(id, p) {
				return true
			}
		}
		return false
	}
}

// ReplaceParts makes v hold what part (ReadParts of the same names) read of the
// named parts, and keeps the rest: the table's existence and flags, each named
// chain (gone when part lacks it), each named set's definition and elements. A
// part that says the table is missing empties v (see Forget).
func (v *View) ReplaceParts(part *View, p Parts) {
	if !part.TableExists {
		v.Forget()
		return
	}
	v.TableExists, v.TableFlags = part.TableExists, part.TableFlags
	for name := range p.Chains {
		if cv, ok := part.Chains[name]; ok {
			v.Chains[name] = cv
		} else {
			delete(v.Chains, name)
		}
	}
	if len(p.Sets) == 0 {
		return
	}
	for name := range p.Sets {
		if s, ok := part.Sets[name]; ok {
			v.Sets[name] = s
		} else {
			delete(v.Sets, name)
		}
	}
	in := inSets(p.Sets)
	for id := range v.Elements {
		if in(id) {
			delete(v.Elements, id)
		}
	}
	if r := v.bound; r != nil {
		for id, e := range r.elements.all() {
			if e.inKernel() && in(id) {
				e.clearKernel()
				r.elements.put(id, e)
			}
		}
	}
	for id, h := range part.Elements {
		v.setHash(id, h)
	}
}

// MarkPartsDirty makes the next plan compare the named chains and the elements
// of the named sets (see MarkAllDirty, which does it for everything); v is the
// view ReplaceParts brought up to date. Set definitions are compared by every
// plan.
func (r *Ruleset) MarkPartsDirty(v *View, p Parts) {
	if len(p.Chains) > 0 {
		r.markChainsDirty(v, p.Chains)
	}
	if len(p.Sets) == 0 {
		return
	}
	in := inSets(p.Sets)
	for id, e := range r.elements.all() {
		if in(id) {
			r.markElem(r.owned[e.owner].name, id)
		}
	}
	for id := range v.Elements {
		if in(id) && !r.elements.has(id) {
			r.markElem(staleOwner, id)
		}
	}
}
