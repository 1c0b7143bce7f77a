package nft

import (
	"hash/fnv"
	"iter"
	"maps"
	"slices"
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

	elements  elementTable    // by Element.ID
	setCounts map[string]int  // elements per set
	onDemand  map[string]bool // sets that exist only while needed (ondemand.go)
	chainRefs map[string]int  // of shared chains
	setRefs   map[string]int  // rules of Chains that name each set (putChain)
	// owners numbers every owner with a fragment (ownerRef); owned[ref] is what
	// it contributed, and freeRefs the numbers of owners gone. One map by name
	// and a list by number, rather than a map of what each owner contributed
	// beside one of their numbers: ~2 MiB less at 30k Services.
	owners   map[string]ownerRef
	owned    []owned
	freeRefs []ownerRef
	// undeclared holds, by ID, the elements of sets the ruleset does not declare:
	// their bytes cannot be split into Datums again (elementOf).
	undeclared map[string]*Element
	// spans is setElements' buffer, reused from one owner to the next.
	spans []arenaSpan

	// dirty holds, per owner, the chains and elements changed since the last Plan, so
	// that a refused transaction can be retried one owner at a time.
	dirty map[string]*dirtyKeys

	// contested holds, for the elements more than one owner adds, the versions of
	// the owners not in effect, sorted by owner. It lives beside the elements, not
	// in each, because contests are rare and elements number in the hundreds of
	// thousands.
	contested map[string][]holder
	// touched holds the contested IDs whose contest SetFragment changed since the
	// last TakeConflicts: what it reports, so that a sync pays for the conflicts
	// its changes take part in, not for every element owners share (a hairpin
	// element per pod that backs several Services: tens of thousands).
	touched map[string]struct{}

	// view is the view whose element hashes live in the entries (bind.go).
	view *View

	// OnConflict, if set, is told about each conflict SetFragment returns. Within a
	// batch of SetFragment calls a conflict may be transient (a Service handing a
	// key over to another); TakeConflicts tells what remains.
	OnConflict func(ElementConflict)
}

// elementEntry is what the ruleset keeps of an element: the lowest owner that adds
// it, whose value is in effect, so two owners rendering one key with different
// values give the same table whatever the order of their SetFragment calls, and
// never a mix of both; and where that owner's arena holds the element's record, its
// ID (the element table's key, elemtable.go) and its value (elementvalue.go).
//
// The entry lives in the element table's slots itself: a table of 30k Services x 10
// endpoints has 660k elements, and an entry allocated apart cost 64 bytes and a
// pointer more each.
type elementEntry struct {
	owner ownerRef // the lowest owner, whose value is in effect
	// at is where the element's record (its ID and value) sits in one of that
	// owner's arenas, and which one (entryArena; see owned). Its top bit
	// (entryInKernel) says that the bound view records the kernel holding this
	// ID, with the value hash kernel (bind.go). A flag of its own made each entry
	// 24 bytes instead of 16 (660k entries at 30k Services); an owner's arena is
	// never near 512 MiB (bit 29 is entryPlanned).
	at     uint32
	kernel uint64
}

const (
	entryInKernel = 1 << 31
	entryArena    = 1 << 30
	// entryPlanned flags, while a plan runs, an entry it already compared
	// (planElements); never set outside one.
	entryPlanned = 1 << 29
)

func (e elementEntry) off() uint32    { return e.at &^ (entryInKernel | entryArena | entryPlanned) }
func (e elementEntry) arena() uint8   { return uint8(e.at >> 30 & 1) }
func (e elementEntry) inKernel() bool { return e.at&entryInKernel != 0 }

// setRecord points the entry at the record at off in its owner's arena number
// arena (0 or 1).
func (e *elementEntry) setRecord(arena uint8, off uint32) {
	e.at = e.at&entryInKernel | uint32(arena&1)<<30 | off
}

// setKernel records that the kernel holds the ID with value hash h.
func (e *elementEntry) setKernel(h uint64) { e.at, e.kernel = e.at|entryInKernel, h }

// clearKernel records that the kernel does not hold the ID.
func (e *elementEntry) clearKernel() { e.at, e.kernel = e.at&^entryInKernel, 0 }

// holder is one owner's version of an element, not in effect: its encoded value
// (a string of the owner's arena, no copy) and, for a set the ruleset does not
// declare, the element itself. A whole Element and its Datums each was 14 MiB at
// 100k Services on the shared bench shape, where a pod's hairpin element is
// rendered by each of its ~3 Services.
type holder struct {
	owner      string
	val        string
	undeclared *Element
}

// owned is what an owner contributed, as the ruleset keeps it: the chains, and the
// arena of its elements' IDs and data (the entries live once, in Ruleset.elements).
//
// The arena is arenas[cur]. While setElements moves the owner's entries to a new
// arena, the other slot holds that one: the element table reads each entry's ID
// from the arena it points into, so an entry must name the arena that holds its
// record at every step, the old one until it is moved and the new one after. The
// other slot is empty outside setElements.
type owned struct {
	name           string // "" while the number is free
	chains, shared []*Chain
	arenas         [2]elementArena
	cur            uint8
}

// elements is the owner's arena.
func (o *owned) elements() elementArena { return o.arenas[o.cur] }

// dirtyKeys are one owner's marks. Most owners mark one chain (their shared
// load-balancing chain) and, when new, all their elements at once: that is held
// without a map (a map each for chains and elements was ~9 MiB of a 30k cold
// start's live heap); the maps are made when more is marked.
type dirtyKeys struct {
	chain  string              // the first chain marked
	chains map[string]struct{} // the others, nil while there are none
	elems  map[string]struct{} // nil while none is marked one by one
	// whole are arenas every element of which is marked: a new owner's first
	// render and a full resync mark all of an owner's elements, and an entry per ID
	// in elems was ~15 MiB of a 30k cold start's live heap. An ID may be in both.
	whole []elementArena
}

func (d *dirtyKeys) markChain(name string) {
	switch {
	case d.chain == "" || d.chain == name:
		d.chain = name
	case d.chains == nil:
		d.chains = map[string]struct{}{name: {}}
	default:
		d.chains[name] = struct{}{}
	}
}

func (d *dirtyKeys) markElem(id string) {
	if d.elems == nil {
		d.elems = map[string]struct{}{}
	}
	d.elems[id] = struct{}{}
}

// eachChain yields the marked chains, each once.
func (d *dirtyKeys) eachChain() iter.Seq[string] {
	return func(yield func(string) bool) {
		if d.chain != "" && !yield(d.chain) {
			return
		}
		for name := range d.chains {
			if name != d.chain && !yield(name) {
				return
			}
		}
	}
}

// chainCount is the number of chains marked.
func (d *dirtyKeys) chainCount() int {
	if d.chain == "" {
		return 0
	}
	n := 1
	for name := range d.chains {
		if name != d.chain {
			n++
		}
	}
	return n
}

// hasChain reports whether the chain name is marked.
func (d *dirtyKeys) hasChain(name string) bool {
	_, ok := d.chains[name]
	return ok || (name != "" && d.chain == name)
}

// eachElem yields the marked element IDs, some perhaps twice: those marked one by
// one sorted, so that a plan is the same from run to run, then the whole arenas'.
func (d *dirtyKeys) eachElem() iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, id := range sortedKeys(d.elems) {
			if !yield(id) {
				return
			}
		}
		for _, a := range d.whole {
			for id := range a.ids() {
				if !yield(id) {
					return
				}
			}
		}
	}
}

// hasElem reports whether id is marked.
func (d *dirtyKeys) hasElem(id string) bool {
	if _, ok := d.elems[id]; ok {
		return true
	}
	for _, a := range d.whole {
		for x := range a.ids() {
			if x == id {
				return true
			}
		}
	}
	return false
}

// staleOwner holds keys found only in the kernel (to delete) during a full plan.
const staleOwner = ""

// Fragment is what one owner contributes: whole chains (owned exclusively), shared
// chains (reference counted: owners that add the same one must add it with the same
// content) and elements (shared by ID: when owners add one ID with different values,
// the lowest owner's value is used and SetFragment reports an ElementConflict).
type Fragment struct {
	Chains   []*Chain
	Shared   []*Chain
	Elements []Element
	// datums is the slab of the Datums handed out by Datums.
	datums []Datum
}

// Datums returns ds stored in the fragment's slab: a renderer's keys and values
// take one growing slab instead of a slice each (two per endpoint), and Reset
// keeps the slab for the next owner's rendering.
func (f *Fragment) Datums(ds ...Datum) []Datum {
	start := len(f.datums)
	f.datums = append(f.datums, ds...)
	return f.datums[start:len(f.datums):len(f.datums)]
}

// Concat is Datums(ds..., more...): a key that extends another, without a slice
// for the two together.
func (f *Fragment) Concat(ds []Datum, more ...Datum) []Datum {
	start := len(f.datums)
	f.datums = append(append(f.datums, ds...), more...)
	return f.datums[start:len(f.datums):len(f.datums)]
}

// Reset empties f for rendering the next owner into it, keeping the memory of
// its elements and of their Datums: a cold sync renders every Service once and
// the ruleset copies each element into its owner's arena, so that memory was a
// third of what a 100k cold sync allocated. Call it only once the ruleset has
// f (SetFragment keeps nothing of its elements); the chains are the ruleset's
// from then on and are not reused.
func (f *Fragment) Reset() {
	clear(f.Elements) // no pointer of the last owner's stays reachable
	*f = Fragment{Elements: f.Elements[:0], datums: f.datums[:0]}
}

// NewRuleset makes an empty ruleset for table family/name with the given sets.
func NewRuleset(family Family, table string, sets ...*Set) *Ruleset {
	r := &Ruleset{
		Family: family, Table: table,
		Sets:      map[string]*Set{},
		Chains:    map[string]*Chain{},
		setCounts: map[string]int{},
		onDemand:  map[string]bool{},
		chainRefs: map[string]int{},
		setRefs:   map[string]int{},
		owners:    map[string]ownerRef{},
		dirty:     map[string]*dirtyKeys{},
		contested: map[string][]holder{},

		undeclared: map[string]*Element{},
	}
	r.elements.idOf = r.idOf
	for _, s := range sets {
		r.Sets[s.Name] = s
	}
	return r
}

// SetFragment replaces everything owner contributed with f. An empty fragment removes
// the owner. It returns the elements of f whose ID another owner (or f itself, where
// the first one wins) gives a different value; see elementEntry. It keeps f's
// chains, and nothing of its elements (see Fragment.Reset).
func (r *Ruleset) SetFragment(owner string, f Fragment) []ElementConflict {
	gone := len(f.Chains) == 0 && len(f.Shared) == 0 && len(f.Elements) == 0
	ref, had := r.owners[owner]
	if !had && gone {
		return nil
	}
	var old owned
	if had {
		old = r.owned[ref]
	} else {
		ref = r.ownerRef(owner)
	}
	newChains := map[string]bool{}
	for _, c := range f.Chains {
		newChains[c.Name] = true
		if prev, ok := r.Chains[c.Name]; !ok || !chainsEqual(prev, c) {
			r.markChain(owner, c.Name)
		}
		r.putChain(c)
	}
	for _, c := range old.chains {
		if !newChains[c.Name] {
			r.dropChain(c.Name)
			r.markChain(owner, c.Name)
		}
	}
	// Add before removing so that a shared chain the owner keeps never
	// drops to zero. A shared chain is marked changed for every owner that uses it,
	// so that whichever of their transactions lands first creates it.
	for _, c := range f.Shared {
		r.chainRefs[c.Name]++
		r.putChain(c)
		r.markChain(owner, c.Name)
	}
	for _, c := range old.shared {
		if r.chainRefs[c.Name]--; r.chainRefs[c.Name] <= 0 {
			delete(r.chainRefs, c.Name)
			r.dropChain(c.Name)
			r.markChain(owner, c.Name)
		}
	}
	conflicts := r.setElements(ref, old.elements(), f.Elements)
	if r.OnConflict != nil {
		for _, c := range conflicts {
			r.OnConflict(c)
		}
	}
	if gone {
		r.releaseOwnerRef(owner)
	} else {
		r.owned[ref].chains, r.owned[ref].shared = f.Chains, f.Shared
	}
	return conflicts
}

// putChain makes c the chain of its name, and dropChain removes one: the only
// ways into and out of Chains, so that setRefs follows the rules naming each set.
func (r *Ruleset) putChain(c *Chain) {
	if prev := r.Chains[c.Name]; prev != nil {
		r.countSetRefs(prev, -1)
	}
	r.Chains[c.Name] = c
	r.countSetRefs(c, 1)
}

func (r *Ruleset) dropChain(name string) {
	if prev := r.Chains[name]; prev != nil {
		r.countSetRefs(prev, -1)
		delete(r.Chains, name)
	}
}

func (r *Ruleset) countSetRefs(c *Chain, delta int) {
	for _, rule := range c.Rules {
		for _, st := range rule.Stmts {
			if name, ok := stmtSet(st); ok {
				if r.setRefs[name] += delta; r.setRefs[name] <= 0 {
					delete(r.setRefs, name)
				}
			}
		}
	}
}

// Elements returns all elements, sorted by ID (by set, in the order the process
// first saw the set names, then by key).
func (r *Ruleset) Elements() []Element {
	out := make([]Element, 0, r.elements.len())
	for id, e := range r.elements.all() {
		out = append(out, r.elementOf(id, e))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

// ElementCount is how many elements the ruleset holds.
func (r *Ruleset) ElementCount() int { return r.elements.len() }

// Element returns the element with the given ID.
func (r *Ruleset) Element(id string) (Element, bool) {
	e, ok := r.elements.get(id)
	if !ok {
		return Element{}, false
	}
	return r.elementOf(id, e), true
}

func (r *Ruleset) keys(owner string) *dirtyKeys {
	d := r.dirty[owner]
	if d == nil {
		d = &dirtyKeys{}
		r.dirty[owner] = d
	}
	return d
}

func (r *Ruleset) markChain(owner, name string) { r.keys(owner).markChain(name) }
func (r *Ruleset) markElem(owner, id string)    { r.keys(owner).markElem(id) }

// markWhole marks every element of the arena a, owner's. An arena marked
// already is not added again: a cold start's full sync marks every owner's
// (MarkAllDirty) after its new fragment did, and the plan then walked, looked
// up and reserved room for every element twice.
func (r *Ruleset) markWhole(owner string, a elementArena) {
	if a == "" {
		return
	}
	d := r.keys(owner)
	if !slices.Contains(d.whole, a) { // the same string: compared by pointer first
		d.whole = append(d.whole, a)
	}
}

// takeDirty removes and returns the changed keys of the given owners (all when
// owners is nil).
func (r *Ruleset) takeDirty(owners []string) map[string]*dirtyKeys {
	if owners == nil {
		taken := r.dirty
		r.dirty = map[string]*dirtyKeys{}
		return taken
	}
	taken := map[string]*dirtyKeys{}
	for _, o := range owners {
		if d, ok := r.dirty[o]; ok {
			taken[o] = d
			delete(r.dirty, o)
		}
	}
	if len(r.dirty) == 0 {
		// A Go map keeps its size when emptied: after a cold start planned in
		// chunks, the map of 30k owners (3.6 MiB) would stay for good.
		r.dirty = map[string]*dirtyKeys{}
	}
	return taken
}

// DirtyOwners lists the owners with changes not yet planned, sorted.
func (r *Ruleset) DirtyOwners() []string { return sortedKeys(r.dirty) }

// DirtyOwnerCount is len(DirtyOwners()), without the list.
func (r *Ruleset) DirtyOwnerCount() int { return len(r.dirty) }

// ReserveElements sizes the element map of a ruleset that holds none yet for about
// n elements: a cold start's map otherwise grows by doubling, each time rehashing
// every element so far (~7% of the 30k cold sync's allocations).
func (r *Ruleset) ReserveElements(n int) {
	r.elements.reserve(n)
}

// ReserveOwners makes room for about n owners in a ruleset that holds few yet: a
// cold start's list and map of owners otherwise grow by doubling, 57 MB allocated
// for 14 MB kept at 100k Services.
func (r *Ruleset) ReserveOwners(n int) {
	if len(r.owners) >= n/4 {
		return
	}
	r.owned = slices.Grow(r.owned, n-len(r.owned))
	owners := make(map[string]ownerRef, n)
	maps.Copy(owners, r.owners)
	r.owners = owners
}

// MarkAllDirty makes the next plan compare everything (full resync), attributing each
// key to its owner; keys only the kernel has go to staleOwner.
func (r *Ruleset) MarkAllDirty(v *View) {
	r.markChainsDirty(v, nil)
	for owner, ref := range r.owners {
		r.markWhole(owner, r.owned[ref].elements())
	}
	// An element has an entry while some owner holds it: no second set of the
	// hundreds of thousands of IDs is needed to find the kernel's unowned ones.
	for id := range v.Elements {
		if !r.elements.has(id) {
			r.markElem(staleOwner, id)
		}
	}
}

// markChainsDirty marks the chains named in only (every chain when only is nil)
// for the next plan: each owner's it renders, and those only the view holds as
// the stale owner's.
func (r *Ruleset) markChainsDirty(v *View, only map[string]bool) {
	owned := map[string]bool{}
	for owner, ref := range r.owners {
		f := &r.owned[ref]
		for _, cs := range [][]*Chain{f.chains, f.shared} {
			for _, c := range cs {
				if only == nil || only[c.Name] {
					r.markChain(owner, c.Name)
					owned[c.Name] = true
				}
			}
		}
	}
	for n := range v.Chains {
		if (only == nil || only[n]) && !owned[n] {
			r.markChain(staleOwner, n)
		}
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
	if a.Comment != b.Comment || string(concatBytes(a.Data)) != string(concatBytes(b.Data)) || (a.Verdict == nil) != (b.Verdict == nil) {
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
		parts = append(parts, `comment "`+limitComment(r.Comment)+`"`)
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
