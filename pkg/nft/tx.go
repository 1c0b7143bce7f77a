package nft

import (
	"maps"
	"slices"
	"sort"
)

// Tx is one atomic transaction, applied in this order: create the table, sets and new
// chains; delete stale elements; replace the rules of changed chains; add elements
// (after the rules, so that binding a rule to a map walks as few elements as possible);
// empty the chains to delete, delete stale sets, then those chains (whatever refers
// to what, nothing left refers to them by then).
type Tx struct {
	Family Family
	Table  string
	// Recreate deletes the existing table first, in the same batch.
	Recreate    bool
	AddSets     []*Set
	NewChains   []*Chain // chains that do not exist yet (their rules are in Chains too)
	DelElements []Element
	Chains      []*Chain // chains whose rules are replaced (flush, then add)
	AddElements []Element
	DelChains   []string
	DelSets     []string

	// planned remembers which owners' changes this transaction carries, so that a
	// refused transaction can be requeued exactly; changed, those whose changes
	// needed an operation.
	planned map[string]*dirtyKeys
	changed map[string]bool
	// adds are the elements a plan adds, as the desired ruleset holds them: the
	// ID and encoded value, strings of their owner's arena. They are encoded
	// straight into netlink messages (elemmsg.go); turning each back into an
	// Element with Datums first was a quarter of what a cold sync allocated
	// (0.6 of 2 GB at 100k Services). AddElements holds, besides, the elements of
	// sets the ruleset does not declare and those of transactions made by hand.
	// sets are the ruleset's set definitions, for Added.
	adds []rawElement
	sets map[string]*Set
	// from is the ruleset planned, and moves its element table's moves then:
	// while they are the same, each add's entry pointer is still its entry, and
	// Commit records the kernel's hash without looking the ID up again.
	from  *Ruleset
	moves uint64
}

// rawElement is an element as the ruleset holds it (elementvalue.go): its ID,
// encoded value and the value's hash, and its entry in the ruleset planned.
type rawElement struct {
	id, val string
	hash    uint64
	entry   *elementEntry
}

// Added is every element the transaction adds, as Elements.
func (t *Tx) Added() []Element {
	out := slices.Clip(t.AddElements)
	for _, r := range t.adds {
		out = append(out, t.rawToElement(r))
	}
	return out
}

// rawToElement rebuilds the element r holds.
func (t *Tx) rawToElement(r rawElement) Element { return elementFrom(t.sets, r.id, r.val) }

// Owners lists the ruleset owners whose changes the transaction carries.
func (t *Tx) Owners() []string { return sortedKeys(t.changed) }

// Empty reports whether the transaction changes nothing.
func (t *Tx) Empty() bool {
	return len(t.AddSets)+len(t.NewChains)+len(t.DelElements)+len(t.Chains)+len(t.AddElements)+len(t.adds)+len(t.DelChains)+len(t.DelSets) == 0
}

// Size counts the objects the transaction touches, for logs and metrics.
func (t *Tx) Size() int {
	n := len(t.AddSets) + len(t.NewChains) + len(t.DelElements) + len(t.AddElements) + len(t.adds) + len(t.DelChains) + len(t.DelSets)
	for _, c := range t.Chains {
		n += 1 + len(c.Rules)
	}
	return n
}

// Plan returns the transaction that turns the kernel's view into the desired ruleset,
// comparing only what changed in the ruleset since the last Plan (or everything after
// a full resync). It does not change v; call Commit after the kernel accepted it.
func Plan(desired *Ruleset, v *View) *Tx { return plan(desired, v, nil) }

// PlanOwners is Plan restricted to the changes of the given owners, so that one
// Service the kernel refuses cannot hold back the others.
func PlanOwners(desired *Ruleset, v *View, owners ...string) *Tx { return plan(desired, v, owners) }

func plan(desired *Ruleset, v *View, owners []string) *Tx {
	tx := &Tx{Family: desired.Family, Table: desired.Table}
	present := desired.PresentSets()
	for _, name := range sortedKeys(present) {
		s := present[name]
		if cur, ok := v.Sets[name]; !ok || !setsEqual(cur, s) {
			tx.AddSets = append(tx.AddSets, s)
		}
	}
	tx.planned = desired.takeDirty(owners)
	// A set no longer needed may still be referred to by a kernel chain that an owner
	// not planned here deletes or rewrites: such sets go with the last owners' changes.
	last := len(desired.dirty) == 0
	tx.changed = map[string]bool{}
	nChains, nElems := 0, 0
	for _, d := range tx.planned {
		nChains += d.chainCount()
		nElems += len(d.elems)
		for _, a := range d.whole {
			nElems += a.count()
		}
	}
	// Sized once: grown by appending, a cold sync's plans allocated several times
	// the transactions themselves. Elements the kernel lacks are the adds' lower
	// bound (all of them in a cold sync); a resync that finds nothing to change
	// reserves nothing.
	chainOwner := make(map[string]string, nChains)
	for owner, d := range tx.planned {
		for k := range d.eachChain() {
			chainOwner[k] = owner
		}
	}
	for _, name := range sortedKeys(chainOwner) {
		want, wanted := desired.Chains[name]
		cur, exists := v.Chains[name]
		switch {
		case wanted && !exists:
			tx.NewChains = append(tx.NewChains, want)
			tx.Chains = append(tx.Chains, want)
		case wanted && !cur.equal(want, desired.Family):
			if cur.Policy != "" && want.Hook != nil {
				tx.NewChains = append(tx.NewChains, want) // re-adding it restores policy accept
			}
			tx.Chains = append(tx.Chains, want)
		case !wanted && exists:
			tx.DelChains = append(tx.DelChains, name)
		default:
			continue
		}
		tx.changed[chainOwner[name]] = true
	}
	planElements(tx, desired, v, nElems)
	for _, name := range sortedKeys(v.Sets) {
		_, declared := desired.Sets[name]
		if _, ok := present[name]; !ok && (!declared || last) {
			tx.DelSets = append(tx.DelSets, name)
		}
	}
	sort.SliceStable(tx.NewChains, func(i, j int) bool { return tx.NewChains[i].Hook == nil && tx.NewChains[j].Hook != nil })
	return tx
}

// plannedElement is a marked element ID, its entry in the desired ruleset (nil
// when the ruleset does not hold it: to delete) and the index of the owner that
// marked it in the sorted list of planned owners.
type plannedElement struct {
	id    string
	entry *elementEntry
	owner int
}

// planElements adds to tx the element operations of its planned owners: about n
// marked IDs. Each ID is compared once, however many owners marked it (or one
// owner twice): an entry is flagged planned while the plan runs. The IDs go in
// the order of their owners, and of each owner's marks (those marked one by one
// sorted, then the whole arenas' in order): a map of every ID to its
// owner, sorted, was a sixth of a cold sync's allocations and a tenth of its
// CPU at 100k Services.
func planElements(tx *Tx, desired *Ruleset, v *View, n int) {
	owners := sortedKeys(tx.planned)
	marked := make([]plannedElement, 0, n)
	var gone map[string]bool // the marked IDs the ruleset does not hold
	for i, owner := range owners {
		for id := range tx.planned[owner].eachElem() {
			entry := desired.elements.ref(id) // valid: the plan puts and deletes none
			switch {
			case entry == nil && !gone[id]:
				if gone == nil {
					gone = map[string]bool{}
				}
				gone[id] = true
			case entry == nil || entry.at&entryPlanned != 0:
				continue
			default:
				entry.at |= entryPlanned
			}
			marked = append(marked, plannedElement{id: id, entry: entry, owner: i})
		}
	}
	defer func() {
		for _, m := range marked {
			if m.entry != nil {
				m.entry.at &^= entryPlanned
			}
		}
	}()
	// The view bound to this ruleset keeps the kernel's hash in the entry: the
	// view is looked up only for IDs the ruleset does not hold (see bind.go).
	inKernel := func(m plannedElement) (uint64, bool) {
		if m.entry == nil || v.bound != desired {
			return v.hash(m.id)
		}
		return m.entry.kernel, m.entry.inKernel()
	}
	// Sized once: grown by appending, a cold sync's plans allocated several times
	// the transactions themselves. Elements the kernel lacks are the adds' lower
	// bound (all of them in a cold sync); a resync that finds nothing to change
	// reserves nothing.
	adds := 0
	for _, m := range marked {
		if _, exists := inKernel(m); m.entry != nil && !exists {
			adds++
		}
	}
	tx.adds = make([]rawElement, 0, adds)
	for _, m := range marked {
		wanted := m.entry != nil
		var val string
		var undeclared *Element
		var wantHash uint64
		if wanted {
			if undeclared = desired.undeclared[m.id]; undeclared != nil {
				wantHash = valueHash(*undeclared)
			} else {
				val = desired.valueOf(*m.entry)
				wantHash = rawValueHash(val)
			}
		}
		curHash, exists := inKernel(m)
		if (exists && wanted && curHash == wantHash) || (!exists && !wanted) {
			continue
		}
		if exists {
			cur, ok := v.element(m.id)
			if !ok {
				continue // a set the view cannot decode; Compatible makes the table be recreated
			}
			tx.DelElements = append(tx.DelElements, cur)
		}
		switch {
		case undeclared != nil:
			tx.AddElements = append(tx.AddElements, *undeclared)
		case wanted:
			tx.adds = append(tx.adds, rawElement{id: m.id, val: val, hash: wantHash, entry: m.entry}) // the ruleset's own strings
		}
		tx.changed[owners[m.owner]] = true
	}
	if len(tx.adds) > 0 {
		tx.sets = maps.Clone(desired.Sets)
		tx.from, tx.moves = desired, desired.elements.moves
	}
}

// PlanFull compares everything, for the first sync and for periodic resyncs.
func PlanFull(desired *Ruleset, v *View) *Tx {
	desired.MarkAllDirty(v)
	return Plan(desired, v)
}

// Requeue puts the transaction's changes back after the kernel refused it, so that
// the next Plan retries them.
func (r *Ruleset) Requeue(tx *Tx) {
	for owner, d := range tx.planned {
		for k := range d.eachChain() {
			r.markChain(owner, k)
		}
		for k := range d.elems {
			r.markElem(owner, k)
		}
		for _, a := range d.whole {
			r.markWhole(owner, a)
		}
	}
}

// Compatible reports whether the kernel's table can be brought to the desired state
// in place: the kernel refuses to redefine a set, or to change a chain's hook or to
// turn a chain into a base chain, so after an upgrade that changed either, or when
// another program redefined one of our objects (or set flags on the table), the
// table must be recreated. Foreign objects under names we do not use are not a reason:
// the plan deletes them.
func Compatible(desired *Ruleset, v *View) bool {
	if !setsCompatible(desired, v) {
		return false
	}
	for _, c := range desired.Chains {
		if !chainCompatible(c, v) {
			return false
		}
	}
	return true
}

// ChangesCompatible is Compatible for a view that was compatible with the
// ruleset when the ruleset's changes were last planned: only the chains marked
// since are compared. Every sync asks before it plans, and a layout's chains grow
// with the distinct endpoint counts in use (16 each): 0.13 CPU s a minute of make
// bench's churn at 30k compared all of them. A view read back (adopted whole, or
// parts another program changed) marks what it read, so that reading it does
// not slip past.
func ChangesCompatible(desired *Ruleset, v *View) bool {
	if !setsCompatible(desired, v) {
		return false
	}
	for _, d := range desired.dirty {
		for name := range d.eachChain() {
			if c, ok := desired.Chains[name]; ok && !chainCompatible(c, v) {
				return false
			}
		}
	}
	return true
}

// setsCompatible checks the table's flags and the sets: there are a few dozen.
func setsCompatible(desired *Ruleset, v *View) bool {
	if v.TableFlags != 0 {
		return false
	}
	for name, s := range desired.Sets {
		if cur, ok := v.Sets[name]; ok && !setsEqual(cur, s) {
			return false
		}
	}
	return true
}

// chainCompatible reports whether the view's chain of c's name, if any, can become c
// in place: the kernel changes neither a chain's hook nor whether it has one.
func chainCompatible(c *Chain, v *View) bool {
	cur, ok := v.Chains[c.Name]
	return !ok || ((cur.Hook == nil) == (c.Hook == nil) && (cur.Hook == nil || *cur.Hook == *c.Hook))
}
