package nft

// Sets declared on demand exist in the table only while they are needed: while they
// hold an element, or a chain of the ruleset refers to them. A layout that shards
// what grows with the cluster into many sets then shows a small cluster only the
// shards it uses, and the table a user reads grows with what they run.

// DeclareOnDemand adds sets that exist only while they hold elements or a chain
// refers to them.
func (r *Ruleset) DeclareOnDemand(sets ...*Set) {
	for _, s := range sets {
		r.Sets[s.Name] = s
		r.onDemand[s.Name] = true
	}
}

// Count returns how many elements the set holds in the desired table.
func (r *Ruleset) Count(set string) int { return r.setCounts[set] }

// PresentSets returns the sets the desired table holds: every set declared with
// NewRuleset, and those declared on demand that are needed now: that hold an
// element, or that a rule names (the kernel refuses a rule naming a set it
// lacks). Every plan asks, so it looks at the sets alone: the rules naming each
// are counted as chains come and go (putChain).
func (r *Ruleset) PresentSets() map[string]*Set {
	if len(r.onDemand) == 0 {
		return r.Sets
	}
	out := make(map[string]*Set, len(r.Sets))
	for name, s := range r.Sets {
		if !r.onDemand[name] || r.setCounts[name] > 0 || r.setRefs[name] > 0 {
			out[name] = s
		}
	}
	return out
}

// stmtSet names the set a statement refers to, if any.
func stmtSet(s Stmt) (string, bool) {
	switch s := s.(type) {
	case Lookup:
		return s.Set, true
	case VMap:
		return s.Map, true
	case DNATMap:
		return s.Map, true
	case Update:
		return s.Set, true
	}
	return "", false
}

// countElement follows the number of elements per set as elements come and go.
func (r *Ruleset) countElement(set string, delta int) {
	if r.setCounts[set] += delta; r.setCounts[set] <= 0 {
		delete(r.setCounts, set)
	}
}
