package nft

// A view bound to a ruleset (Ruleset.Bind) keeps what the kernel holds of the
// elements the ruleset also holds in the ruleset's own entries, not in a map of its
// own: at 30k Services x 10 endpoints the view's map of 660k IDs was 29 MiB, the
// entries' extra hash 6 MiB. View.Elements then holds only the IDs no owner holds
// (stale ones, and those an owner dropped until the deletion is committed).

// Bind makes v the view whose element hashes live in r's entries. The view bound
// before gets its hashes back, so it stays a complete view of what it saw.
func (r *Ruleset) Bind(v *View) {
	if r.view == v {
		return
	}
	if old := r.view; old != nil {
		for id, e := range r.elements.all() {
			if e.inKernel() {
				old.Elements[id] = e.kernel
				e.clearKernel()
				r.elements.put(id, e)
			}
		}
		old.bound = nil
	}
	r.view = v
	if v == nil {
		return
	}
	v.bound = r
	// A new map, not deletions from the old one: a Go map never shrinks, and the
	// point is to free what the view's map took.
	rest := map[string]uint64{}
	for id, h := range v.Elements {
		if e, held := r.elements.get(id); held {
			e.setKernel(h)
			r.elements.put(id, e)
			continue
		}
		rest[id] = h
	}
	v.Elements = rest
}

// Forget makes v, in place, the view of a table that does not exist (another
// program deleted it): no sets, chains or elements, and in the bound ruleset's
// entries no kernel hash. Unlike binding a new empty view (Bind), nothing of what
// v held is kept: at 10k Services Bind gave the old view back the hashes of 275k
// elements, a map built only to be dropped (~130 ms of a deleted table's repair,
// before anything was sent). The entries are cleared slot by slot, in memory
// order, without a lookup each.
func (v *View) Forget() {
	v.TableExists, v.TableFlags = false, 0
	// New maps, not emptied ones: a Go map never shrinks.
	v.Sets, v.Chains, v.Elements = map[string]*Set{}, map[string]ChainView{}, map[string]uint64{}
	if r := v.bound; r != nil {
		r.elements.each((*elementEntry).clearKernel)
	}
}

// hash returns the value hash of the element the kernel holds under id.
func (v *View) hash(id string) (uint64, bool) {
	if v.bound != nil {
		if e, held := v.bound.elements.get(id); held {
			return e.kernel, e.inKernel()
		}
	}
	h, ok := v.Elements[id]
	return h, ok
}

// setHash records that the kernel holds id with value hash h.
func (v *View) setHash(id string, h uint64) {
	if v.bound != nil {
		if e := v.bound.elements.ref(id); e != nil {
			e.setKernel(h)
			return
		}
	}
	v.Elements[id] = h
}

// deleteHash records that the kernel no longer holds id.
func (v *View) deleteHash(id string) {
	if v.bound != nil {
		if e, held := v.bound.elements.get(id); held && e.inKernel() {
			e.clearKernel()
			v.bound.elements.put(id, e)
		}
	}
	delete(v.Elements, id)
}

// takeHash moves the kernel's hash of id from the bound view's map into a new entry.
func (r *Ruleset) takeHash(id string, e *elementEntry) {
	if r.view == nil {
		return
	}
	if h, ok := r.view.Elements[id]; ok {
		e.setKernel(h)
		delete(r.view.Elements, id)
	}
}

// leaveHash hands the kernel's hash of an entry being deleted to the bound view.
func (r *Ruleset) leaveHash(id string, e elementEntry) {
	if r.view != nil && e.inKernel() {
		r.view.Elements[id] = e.kernel
	}
}
