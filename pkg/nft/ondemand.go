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
// NewRuleset, and those declared on demand that are needed now.
func (r *Ruleset) PresentSets() map[string]*Set {
	if len(r.onDemand) == 0 {
		return r.Sets
	}
	referenced := map[string]bool{}
	for _, c := range r.Chains {
		for _, rule := range c.Rules {
			for _, s := range rule.Stmts {
				for _, name := range stmtSets(s) {
					referenced[name] = true
				}
			}
		}
	}
	out := make(map[string]*Set, len(r.Sets))
	for name, s := range r.Sets {
		if !r.onDemand[name] || r.setCounts[name] > 0 || referenced[name] {
			out[name] = s
		}
	}
	return out
}

// stmtSets names the sets a statement refers to.
func stmtSets(s Stmt) []string {
	switch s := s.(type) {
	case Lookup:
		return []string{s.Set}
	case VMap:
		return []string{s.Map}
	case DNATMap:
		return []string{s.Map}
	case Update:
		return []string{s.Set}
	}
	return nil
}

// countElement follows the number of elements per set as elements come and go.
func (r *Ruleset) countElement(set string, delta int) {
	if r.setCounts[set] += delta; r.setCounts[set] <= 0 {
		delete(r.setCounts, set)
	}
}
