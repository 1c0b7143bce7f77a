package nft

import (
	"slices"
	"strings"
)

// View is what the kernel holds in svcproxy's table, as far as diffs need to know:
// set definitions, chains with the hashes of their rules, and the elements of
// non-dynamic sets. It is read from the kernel on start and on resync, and kept up to
// date in memory after every successful transaction.
type View struct {
	TableExists bool
	// TableFlags are the table's flags as read (svcproxy writes none; dormant, for
	// one, turns every hook off).
	TableFlags uint32
	Sets       map[string]*Set
	Chains     map[string]ChainView
	// Elements maps Element.ID to valueHash: what a diff needs, at a fraction of the
	// memory of the elements themselves (there can be hundreds of thousands). In a
	// view bound to a ruleset (bind.go), only the IDs the ruleset does not hold.
	Elements map[string]uint64

	bound *Ruleset
}

// ChainView is a chain as the kernel holds it.
type ChainView struct {
	Hook *ChainHook
	// Policy is empty for svcproxy's policy (accept), else what the kernel holds.
	Policy string
	Rules  []uint64 // Rule.Hash of each rule, in order
	// Exprs is, for a chain read from the kernel, the digest of each rule's
	// expressions (exprsDigest), in order: what the rules do, whatever their user
	// data claims. It is nil for a chain the view recorded from our own commit,
	// which holds what we wrote.
	Exprs []uint64
	// from is the chain a commit of ours wrote (chainViewOf): a chain the ruleset
	// holds is not changed once rendered, so the plan compares that chain, which
	// owners that share it hand back at every render, without hashing its rules
	// through their text (1% of make bench's churn CPU at 30k).
	from *Chain
}

// NewView returns the view of a table that does not exist.
func NewView() *View {
	return &View{Sets: map[string]*Set{}, Chains: map[string]ChainView{}, Elements: map[string]uint64{}}
}

func chainViewOf(c *Chain) ChainView {
	v := ChainView{Hook: c.Hook, Rules: make([]uint64, len(c.Rules)), from: c}
	for i, r := range c.Rules {
		v.Rules[i] = r.Hash()
	}
	return v
}

// equal reports whether the kernel's chain is c: the same hook and policy, and
// rules with the same hashes, doing (when read from the kernel) what c's rules
// do in a table of the given family.
func (v ChainView) equal(c *Chain, family Family) bool {
	if v.from == c && v.Policy == "" && v.Exprs == nil {
		return true
	}
	if (v.Hook == nil) != (c.Hook == nil) || (v.Hook != nil && *v.Hook != *c.Hook) || v.Policy != "" || len(v.Rules) != len(c.Rules) {
		return false
	}
	if v.Exprs != nil && len(v.Exprs) != len(c.Rules) {
		return false
	}
	for i, r := range c.Rules {
		if v.Rules[i] != r.Hash() {
			return false
		}
	}
	if v.Exprs == nil {
		return true
	}
	for i, r := range c.Rules {
		// An error means svcproxy cannot encode its own rule, which Apply would
		// refuse too: the chain is written and the error reported there.
		if d, err := ruleDigest(family, r); err != nil || v.Exprs[i] != d {
			return false
		}
	}
	return true
}

// Commit records a transaction that the kernel accepted.
func (v *View) Commit(tx *Tx) {
	v.TableExists = true
	for _, s := range tx.AddSets {
		v.Sets[s.Name] = s
	}
	for _, e := range tx.DelElements {
		v.deleteHash(e.ID())
	}
	for _, c := range tx.DelChains {
		delete(v.Chains, c)
	}
	for _, c := range tx.Chains {
		v.Chains[c.Name] = chainViewOf(c)
	}
	for _, e := range tx.AddElements {
		v.setHash(e.ID(), valueHash(e))
	}
	inPlace := v.bound != nil && v.bound == tx.from && v.bound.elements.moves == tx.moves
	for _, r := range tx.adds {
		if inPlace {
			r.entry.setKernel(r.hash) // a lookup less for each element added
			continue
		}
		v.setHash(r.id, r.hash) // the ruleset's own ID: the view keeps no copy
	}
	for _, s := range tx.DelSets {
		delete(v.Sets, s)
		// Deleting a set deletes its elements, also those of owners whose own changes
		// are still to come; rare (a shard emptied), so a walk is affordable.
		prefix := idPrefix(s)
		for id := range v.Elements {
			if strings.HasPrefix(id, prefix) {
				delete(v.Elements, id)
			}
		}
		if v.bound != nil {
			for id, e := range v.bound.elements.all() {
				if e.inKernel() && strings.HasPrefix(id, prefix) {
					v.deleteHash(id)
				}
			}
		}
	}
}

// setsEqual reports whether a and b declare the same set: name, types and flags;
// a size of 0 (the kernel's default) matches any.
func setsEqual(a, b *Set) bool {
	if a == b {
		return true // the view holds the desired set it committed
	}
	// The types as numbers, not as the texts nft prints: every sync compares
	// every set twice (ChangesCompatible, the plan), and the texts were a tenth
	// of what a sync of one endpoint allocated.
	if a.Name != b.Name || a.Verdict != b.Verdict || a.Dynamic != b.Dynamic || a.Timeout != b.Timeout ||
		!slices.Equal(a.Key, b.Key) || !slices.Equal(a.Data, b.Data) {
		return false
	}
	return a.Size == 0 || b.Size == 0 || a.Size == b.Size
}

// valueHash identifies what an element maps to (data, verdict) and its comment.
// It is FNV-1a, computed in place: the plan hashes every changed element.
func valueHash(e Element) uint64 {
	h := fnvOffset
	for i := range e.Data {
		d := &e.Data[i]
		h = fnvBytes(h, d.b[:d.n])
		if len(e.Data) > 1 {
			for pad := (4 - int(d.n)%4) % 4; pad > 0; pad-- {
				h = fnvByte(h, 0)
			}
		}
	}
	if e.Verdict != nil {
		h = fnvByte(fnvByte(h, 0), byte(e.Verdict.Kind))
		h = fnvString(h, e.Verdict.Chain)
	}
	h = fnvByte(h, 0)
	return fnvString(h, limitComment(e.Comment))
}

const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

func fnvByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime }

func fnvBytes(h uint64, bs []byte) uint64 {
	for _, b := range bs {
		h = fnvByte(h, b)
	}
	return h
}

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = fnvByte(h, s[i])
	}
	return h
}

// element rebuilds the key of an element the view holds, enough to delete it.
func (v *View) element(id string) (Element, bool) {
	set, key := splitID(id)
	s := v.Sets[set]
	if s == nil {
		return Element{}, false
	}
	ds, err := splitBytes(s.Key, []byte(key))
	if err != nil {
		return Element{}, false
	}
	return Element{Set: set, Key: ds}, true
}
