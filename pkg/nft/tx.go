package nft

import "sort"

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
	// addIDs[i] is AddElements[i].ID(), the string the desired ruleset already holds,
	// so the view does not keep a copy of every element ID.
	addIDs []string
}

// Owners lists the ruleset owners whose changes the transaction carries.
func (t *Tx) Owners() []string { return sortedKeys(t.changed) }

// Empty reports whether the transaction changes nothing.
func (t *Tx) Empty() bool {
	return len(t.AddSets)+len(t.NewChains)+len(t.DelElements)+len(t.Chains)+len(t.AddElements)+len(t.DelChains)+len(t.DelSets) == 0
}

// Size counts the objects the transaction touches, for logs and metrics.
func (t *Tx) Size() int {
	n := len(t.AddSets) + len(t.NewChains) + len(t.DelElements) + len(t.AddElements) + len(t.DelChains) + len(t.DelSets)
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
	chainOwner, elemOwner := make(map[string]string, nChains), make(map[string]string, nElems)
	for owner, d := range tx.planned {
		for k := range d.eachChain() {
			chainOwner[k] = owner
		}
		for k := range d.eachElem() {
			elemOwner[k] = owner
		}
	}
	// Each element's entry is looked up once, for the count and for the plan
	// below: the view bound to this ruleset keeps the kernel's hash in it, and a
	// lookup each in both places cost a deleted table's repair at 10k Services
	// 275k lookups more.
	ids := sortedKeys(elemOwner)
	entries := make([]elementEntry, len(ids))
	held := make([]bool, len(ids)) // by the ruleset: wanted
	newElems := 0
	for i, id := range ids {
		entries[i], held[i] = desired.elements.get(id)
		exists := entries[i].inKernel()
		if !held[i] || v.bound != desired {
			_, exists = v.hash(id)
		}
		if held[i] && !exists {
			newElems++
		}
	}
	tx.AddElements, tx.addIDs = make([]Element, 0, newElems), make([]string, 0, newElems)
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
	for i, id := range ids {
		entry, wanted := entries[i], held[i]
		var want Element
		if wanted {
			want = desired.elementOf(id, entry)
		}
		// The view bound to this ruleset keeps the kernel's hash in the entry just
		// read: a second lookup of each of a cold sync's 363k IDs in the same map.
		curHash, exists := entry.kernel, entry.inKernel()
		if !wanted || v.bound != desired {
			curHash, exists = v.hash(id)
		}
		same := exists && wanted && curHash == valueHash(want)
		if same || (!exists && !wanted) {
			continue
		}
		if exists {
			cur, ok := v.element(id)
			if !ok {
				continue // a set the view cannot decode; Compatible makes the table be recreated
			}
			tx.DelElements = append(tx.DelElements, cur)
		}
		if wanted {
			tx.AddElements = append(tx.AddElements, want)
			tx.addIDs = append(tx.addIDs, id) // the ruleset's own string (see elementEntry)
		}
		tx.changed[elemOwner[id]] = true
	}
	for _, name := range sortedKeys(v.Sets) {
		_, declared := desired.Sets[name]
		if _, ok := present[name]; !ok && (!declared || last) {
			tx.DelSets = append(tx.DelSets, name)
		}
	}
	sort.SliceStable(tx.NewChains, func(i, j int) bool { return tx.NewChains[i].Hook == nil && tx.NewChains[j].Hook != nil })
	return tx
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
	if v.TableFlags != 0 {
		return false
	}
	for name, s := range desired.Sets {
		if cur, ok := v.Sets[name]; ok && !setsEqual(cur, s) {
			return false
		}
	}
	for name, c := range desired.Chains {
		if cur, ok := v.Chains[name]; ok && ((cur.Hook == nil) != (c.Hook == nil) || (cur.Hook != nil && *cur.Hook != *c.Hook)) {
			return false
		}
	}
	return true
}
