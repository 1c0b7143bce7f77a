package nft

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Fake is an in-memory Kernel for tests of the sync loop. It checks what the kernel
// would refuse (references to missing chains and sets, deleting what does not exist,
// deleting a chain that is still referenced) and can be told to fail.
type Fake struct {
	mu      sync.Mutex
	tables  map[string]*fakeTable
	applied int
	gen     uint32
	// FailNext makes the next n Apply calls fail without changing anything.
	FailNext int
	// Refuse, when set, is asked about every transaction; an error refuses it whole,
	// as the kernel refuses a batch with one bad message.
	Refuse func(tx *Tx) error
	// DestroyFails, when set, is asked about every DestroyElements call; an error
	// refuses it (it runs under the fake's lock: it must not call the fake).
	DestroyFails func(elems []Element) error
}

type fakeTable struct {
	view   *View
	chains map[string]*Chain
	elems  map[string]Element
	dyn    map[string]Element // elements of dynamic sets, as update statements leave them
	// refs counts, per chain, the elements and rules that go to it, so that a
	// transaction checks what it changes, not the whole table (a copy and a walk of
	// every element made each one-Service sync of a 30k test table cost ~100 MiB).
	// nil until the first transaction counts them (tests build tables directly).
	refs map[string]int
	// dangling are chains deleted behind the table's back (Tamper) while rules
	// may still go to them: every transaction is refused until none does, as the
	// whole-table check did.
	dangling map[string]bool
}

var _ Kernel = &Fake{}

// NewFake returns an empty fake kernel.
func NewFake() *Fake { return &Fake{tables: map[string]*fakeTable{}} }

func fakeKey(f Family, t string) string { return f.String() + " " + t }

func newFakeTable() *fakeTable {
	return &fakeTable{view: NewView(), chains: map[string]*Chain{}, elems: map[string]Element{}, dyn: map[string]Element{},
		refs: map[string]int{}, dangling: map[string]bool{}}
}

// Applied counts the transactions the fake accepted.
func (f *Fake) Applied() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

// Apply validates tx while applying it to the table and undoes it unless all of it
// is valid, as the kernel's transactions do. It costs what tx changes.
func (f *Fake) Apply(ctx context.Context, tx *Tx) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if tx.Empty() {
		return nil // as Netlink.Apply: nothing is sent, the generation stays
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.FailNext > 0 {
		f.FailNext--
		return errors.New("fake: injected failure")
	}
	if f.Refuse != nil {
		if err := f.Refuse(tx); err != nil {
			return err
		}
	}
	t := f.tables[fakeKey(tx.Family, tx.Table)]
	if tx.Recreate {
		if t == nil {
			return fmt.Errorf("fake: recreate missing table %s", tx.Table)
		}
		t = nil
	}
	if t == nil {
		t = newFakeTable() // stored only if tx is valid
	}
	t.countRefs()
	var u undoLog
	if err := t.apply(tx, &u); err != nil {
		u.undo()
		return err
	}
	t.view.TableExists = true
	f.tables[fakeKey(tx.Family, tx.Table)] = t
	f.applied++
	f.gen++
	return nil
}

// undoLog restores what a refused transaction changed, last change first.
type undoLog []func()

func (u undoLog) undo() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

func put[K comparable, V any](u *undoLog, m map[K]V, k K, v V) {
	old, had := m[k]
	*u = append(*u, func() {
		if had {
			m[k] = old
		} else {
			delete(m, k)
		}
	})
	m[k] = v
}

func del[K comparable, V any](u *undoLog, m map[K]V, k K) {
	old, had := m[k]
	if !had {
		return
	}
	*u = append(*u, func() { m[k] = old })
	delete(m, k)
}

// ref adds delta to the count of what goes to chain (none for "").
func (t *fakeTable) ref(u *undoLog, chain string, delta int) {
	if chain == "" {
		return
	}
	if n := t.refs[chain] + delta; n != 0 {
		put(u, t.refs, chain, n)
	} else {
		del(u, t.refs, chain)
	}
}

// elemTarget and ruleTargets name the chains an element or a chain's rules go to.
func elemTarget(e Element) string {
	if e.Verdict != nil {
		return e.Verdict.Chain
	}
	return ""
}

func ruleTargets(c *Chain, yield func(string)) {
	if c == nil {
		return
	}
	for _, r := range c.Rules {
		for _, s := range r.Stmts {
			if v, ok := s.(Verdict); ok && v.Chain != "" {
				yield(v.Chain)
			}
		}
	}
}

// countRefs counts the references of a table built without them.
func (t *fakeTable) countRefs() {
	if t.refs != nil {
		return
	}
	t.refs, t.dangling = map[string]int{}, map[string]bool{}
	for _, e := range t.elems {
		if c := elemTarget(e); c != "" {
			t.refs[c]++
		}
	}
	for _, c := range t.chains {
		ruleTargets(c, func(name string) { t.refs[name]++ })
	}
}

func (t *fakeTable) apply(tx *Tx, u *undoLog) error {
	v := t.view
	for _, s := range tx.AddSets {
		if old, ok := v.Sets[s.Name]; ok && !setsEqual(old, s) {
			return fmt.Errorf("fake: set %s exists with another definition", s.Name)
		}
		put(u, v.Sets, s.Name, s)
	}
	for _, c := range tx.NewChains {
		put(u, v.Chains, c.Name, ChainView{Hook: c.Hook})
	}
	for _, e := range tx.DelElements {
		id := e.ID()
		cur, ok := t.elems[id]
		if !ok {
			return fmt.Errorf("fake: delete missing element %s in %s", e, e.Set)
		}
		t.ref(u, elemTarget(cur), -1)
		del(u, t.elems, id)
	}
	for _, c := range tx.Chains {
		if _, ok := v.Chains[c.Name]; !ok {
			return fmt.Errorf("fake: rules for missing chain %s", c.Name)
		}
		put(u, v.Chains, c.Name, chainViewOf(c))
		ruleTargets(t.chains[c.Name], func(name string) { t.ref(u, name, -1) })
		ruleTargets(c, func(name string) { t.ref(u, name, 1) })
		put(u, t.chains, c.Name, c)
	}
	for _, e := range tx.Added() {
		if _, ok := v.Sets[e.Set]; !ok {
			return fmt.Errorf("fake: element for missing set %s", e.Set)
		}
		id := e.ID()
		if _, ok := t.elems[id]; ok {
			return fmt.Errorf("fake: element %s exists in %s", e, e.Set)
		}
		if c := elemTarget(e); c != "" {
			if _, ok := v.Chains[c]; !ok {
				return fmt.Errorf("fake: element %s refers to missing chain", e)
			}
			t.ref(u, c, 1)
		}
		put(u, t.elems, id, e)
	}
	// As Netlink.Apply: sets go before chains, and a deleted set takes its elements
	// (and their references to chains) with it. Rare (a shard emptied): a walk.
	for _, name := range tx.DelSets {
		if _, ok := v.Sets[name]; !ok {
			return fmt.Errorf("fake: delete missing set %s", name)
		}
		del(u, v.Sets, name)
		for id, e := range t.elems {
			if e.Set == name {
				t.ref(u, elemTarget(e), -1)
				del(u, t.elems, id)
			}
		}
		for id, e := range t.dyn {
			if e.Set == name {
				del(u, t.dyn, id)
			}
		}
	}
	for _, name := range tx.DelChains {
		if _, ok := v.Chains[name]; !ok {
			return fmt.Errorf("fake: delete missing chain %s", name)
		}
		del(u, v.Chains, name)
		ruleTargets(t.chains[name], func(target string) { t.ref(u, target, -1) })
		del(u, t.chains, name)
	}
	return t.checkReferences(tx)
}

// checkReferences refuses a transaction after which an element or a rule goes to
// a chain that does not exist: one of the chains it deleted (or Tamper did), or
// one its new rules name.
func (t *fakeTable) checkReferences(tx *Tx) error {
	check := func(name string) error {
		if _, ok := t.view.Chains[name]; ok || t.refs[name] == 0 {
			return nil
		}
		for _, e := range t.elems {
			if elemTarget(e) == name {
				return fmt.Errorf("fake: chain %s deleted but element %s still refers to it", name, e)
			}
		}
		for _, c := range t.chains {
			var err error
			ruleTargets(c, func(target string) {
				if target == name && err == nil {
					err = fmt.Errorf("fake: rule in %s jumps to missing chain %s", c.Name, name)
				}
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	for _, name := range tx.DelChains {
		if err := check(name); err != nil {
			return err
		}
	}
	for name := range t.dangling {
		if err := check(name); err != nil {
			return err
		}
	}
	for _, c := range tx.Chains {
		var err error
		ruleTargets(c, func(target string) {
			if err == nil {
				err = check(target)
			}
		})
		if err != nil {
			return err
		}
	}
	for name := range t.dangling {
		if _, ok := t.view.Chains[name]; ok || t.refs[name] == 0 {
			delete(t.dangling, name) // repaired: not undone, nothing is left to check
		}
	}
	return nil
}

// Read returns a copy of the table's view.
func (f *Fake) Read(ctx context.Context, family Family, table string) (*View, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := NewView()
	t := f.tables[fakeKey(family, table)]
	if t == nil {
		return out, nil
	}
	out.TableExists, out.TableFlags = true, t.view.TableFlags
	for k, v := range t.view.Sets {
		out.Sets[k] = v
	}
	for k, e := range t.elems {
		out.Elements[k] = valueHash(e)
	}
	for k, v := range t.view.Chains {
		out.Chains[k] = v
	}
	return out, nil
}

// ReadParts is Read of the parts p names, as Netlink.ReadParts reads them: the
// table's existence and flags, the named chains, the named sets with their
// elements; a named part the table lacks is missing from the view, and nothing
// else is in it.
func (f *Fake) ReadParts(ctx context.Context, family Family, table string, p Parts) (*View, error) {
	v, err := f.Read(ctx, family, table)
	if err != nil || !v.TableExists {
		return v, err
	}
	for name := range v.Chains {
		if !p.Chains[name] {
			delete(v.Chains, name)
		}
	}
	for name := range v.Sets {
		if !p.Sets[name] {
			delete(v.Sets, name)
		}
	}
	in := inSets(p.Sets)
	for id := range v.Elements {
		if !in(id) {
			delete(v.Elements, id)
		}
	}
	return v, nil
}

// DeleteTable removes the table.
func (f *Fake) DeleteTable(ctx context.Context, family Family, table string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.tables, fakeKey(family, table))
	f.gen++
	return nil
}

// Generation counts committed changes, like the kernel's ruleset generation.
func (f *Fake) Generation(ctx context.Context) (uint32, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gen, nil
}

// ForeignCommit simulates another program committing a change to its own table.
func (f *Fake) ForeignCommit() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen++
}

// Chain returns the rules the fake holds for a chain (tests).
func (f *Fake) Chain(family Family, table, chain string) (*Chain, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tables[fakeKey(family, table)]
	if t == nil {
		return nil, false
	}
	c, ok := t.chains[chain]
	return c, ok
}

// Tamper deletes a chain behind the proxy's back (drift tests). Elements that
// refer to it are removed too, as the kernel would insist.
func (f *Fake) Tamper(family Family, table, chain string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tables[fakeKey(family, table)]
	if t == nil {
		return
	}
	f.gen++
	t.countRefs()
	var u undoLog // never undone
	ruleTargets(t.chains[chain], func(target string) { t.ref(&u, target, -1) })
	delete(t.chains, chain)
	delete(t.view.Chains, chain)
	for id, e := range t.elems {
		if e.Verdict != nil && e.Verdict.Chain == chain {
			t.ref(&u, chain, -1)
			delete(t.elems, id)
		}
	}
	if t.refs[chain] > 0 {
		t.dangling[chain] = true // rules still go to it
	}
}

// Ruleset returns what the fake holds as a Ruleset, so tests can Trace packets
// through the "kernel" state rather than through what the proxy meant to write.
func (f *Fake) Ruleset(family Family, table string) *Ruleset {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tables[fakeKey(family, table)]
	if t == nil {
		return NewRuleset(family, table)
	}
	var sets []*Set
	for _, s := range t.view.Sets {
		sets = append(sets, s)
	}
	r := NewRuleset(family, table, sets...)
	frag := Fragment{}
	for _, c := range t.chains {
		frag.Chains = append(frag.Chains, c)
	}
	for _, e := range t.elems {
		frag.Elements = append(frag.Elements, e)
	}
	r.SetFragment("kernel", frag)
	return r
}

// AddDynamic puts an element in a dynamic set, as the kernel's update statement does
// when traffic passes (tests).
func (f *Fake) AddDynamic(family Family, table string, e Element) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.tables[fakeKey(family, table)]; t != nil {
		t.dyn[e.ID()] = e
	}
}

// DynamicElements returns the elements of dynamic set s, sorted by ID.
func (f *Fake) DynamicElements(ctx context.Context, family Family, table string, s *Set) ([]Element, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tables[fakeKey(family, table)]
	if t == nil || t.view.Sets[s.Name] == nil {
		return nil, fmt.Errorf("fake: list elements of missing set %s", s.Name)
	}
	var out []Element
	for _, id := range sortedKeys(t.dyn) {
		if e := t.dyn[id]; e.Set == s.Name {
			out = append(out, e)
		}
	}
	return out, nil
}

// DestroyElements deletes the elements that are present (as NFT_MSG_DESTROYSETELEM
// does); DestroyFails, when set, is asked first and can refuse the transaction.
func (f *Fake) DestroyElements(ctx context.Context, family Family, table string, elems []Element) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tables[fakeKey(family, table)]
	if t == nil {
		return fmt.Errorf("fake: destroy elements in missing table %s", table)
	}
	if f.DestroyFails != nil {
		if err := f.DestroyFails(elems); err != nil {
			return err
		}
	}
	for _, e := range elems {
		delete(t.dyn, e.ID())
	}
	f.applied++
	f.gen++
	return nil
}
