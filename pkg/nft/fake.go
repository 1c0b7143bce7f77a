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
}

var _ Kernel = &Fake{}

// NewFake returns an empty fake kernel.
func NewFake() *Fake { return &Fake{tables: map[string]*fakeTable{}} }

func fakeKey(f Family, t string) string { return f.String() + " " + t }

// Applied counts the transactions the fake accepted.
func (f *Fake) Applied() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

// Apply validates tx against a copy of the table and swaps it in only if all of it
// is valid, as the kernel's transactions do.
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
	cur := f.tables[fakeKey(tx.Family, tx.Table)]
	if tx.Recreate {
		if cur == nil {
			return fmt.Errorf("fake: recreate missing table %s", tx.Table)
		}
		cur = nil
	}
	next := &fakeTable{view: NewView(), chains: map[string]*Chain{}, elems: map[string]Element{}, dyn: map[string]Element{}}
	if cur != nil {
		for k, e := range cur.dyn {
			next.dyn[k] = e
		}
		for k, v := range cur.view.Sets {
			next.view.Sets[k] = v
		}
		for k, e := range cur.elems {
			next.elems[k] = e
		}
		for k, v := range cur.view.Chains {
			next.view.Chains[k] = v
		}
		for k, v := range cur.chains {
			next.chains[k] = v
		}
	}
	v := next.view
	for _, s := range tx.AddSets {
		if old, ok := v.Sets[s.Name]; ok && !setsEqual(old, s) {
			return fmt.Errorf("fake: set %s exists with another definition", s.Name)
		}
		v.Sets[s.Name] = s
	}
	for _, c := range tx.NewChains {
		v.Chains[c.Name] = ChainView{Hook: c.Hook}
	}
	for _, e := range tx.DelElements {
		if _, ok := next.elems[e.ID()]; !ok {
			return fmt.Errorf("fake: delete missing element %s in %s", e, e.Set)
		}
		delete(next.elems, e.ID())
	}
	for _, c := range tx.Chains {
		if _, ok := v.Chains[c.Name]; !ok {
			return fmt.Errorf("fake: rules for missing chain %s", c.Name)
		}
		v.Chains[c.Name] = chainViewOf(c)
		next.chains[c.Name] = c
	}
	for _, e := range tx.AddElements {
		if _, ok := v.Sets[e.Set]; !ok {
			return fmt.Errorf("fake: element for missing set %s", e.Set)
		}
		if _, ok := next.elems[e.ID()]; ok {
			return fmt.Errorf("fake: element %s exists in %s", e, e.Set)
		}
		if e.Verdict != nil && e.Verdict.Chain != "" {
			if _, ok := v.Chains[e.Verdict.Chain]; !ok {
				return fmt.Errorf("fake: element %s refers to missing chain", e)
			}
		}
		next.elems[e.ID()] = e
	}
	// As Netlink.Apply: sets go before chains, and a deleted set takes its elements
	// (and their references to chains) with it.
	for _, name := range tx.DelSets {
		if _, ok := v.Sets[name]; !ok {
			return fmt.Errorf("fake: delete missing set %s", name)
		}
		delete(v.Sets, name)
		for id, e := range next.elems {
			if e.Set == name {
				delete(next.elems, id)
			}
		}
		for id, e := range next.dyn {
			if e.Set == name {
				delete(next.dyn, id)
			}
		}
	}
	for _, name := range tx.DelChains {
		if _, ok := v.Chains[name]; !ok {
			return fmt.Errorf("fake: delete missing chain %s", name)
		}
		delete(v.Chains, name)
		delete(next.chains, name)
	}
	if err := next.checkReferences(); err != nil {
		return err
	}
	v.TableExists = true
	f.tables[fakeKey(tx.Family, tx.Table)] = next
	f.applied++
	f.gen++
	return nil
}

func (t *fakeTable) checkReferences() error {
	for _, e := range t.elems {
		if e.Verdict != nil && e.Verdict.Chain != "" {
			if _, ok := t.view.Chains[e.Verdict.Chain]; !ok {
				return fmt.Errorf("fake: chain %s deleted but element %s still refers to it", e.Verdict.Chain, e)
			}
		}
	}
	for _, c := range t.chains {
		for _, r := range c.Rules {
			for _, s := range r.Stmts {
				if v, ok := s.(Verdict); ok && v.Chain != "" {
					if _, ok := t.view.Chains[v.Chain]; !ok {
						return fmt.Errorf("fake: rule in %s jumps to missing chain %s", c.Name, v.Chain)
					}
				}
			}
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
	delete(t.chains, chain)
	delete(t.view.Chains, chain)
	for id, e := range t.elems {
		if e.Verdict != nil && e.Verdict.Chain == chain {
			delete(t.elems, id)
		}
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
