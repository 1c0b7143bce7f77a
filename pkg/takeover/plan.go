package takeover

import (
	"fmt"
	"sort"
)

// The plan is pure: from what one iptables-nft table holds (chain names, which are
// base chains, the jump and goto targets of every rule) it decides which rules and
// chains go. Netlink reads feed it (nftables.go) and one transaction carries it out.

// tableInfo is what a table holds, as far as the plan needs to know.
type tableInfo struct {
	Name   string
	Chains []chainInfo
}

// chainInfo is one chain: Base when it is attached to a hook (PREROUTING, OUTPUT, ...).
// The rules of kube-proxy's chains are read only when the plan keeps the chain
// (RulesRead): those it removes are flushed whatever they hold, and reading tens of
// thousands of rules is what would make the takeover slow.
type chainInfo struct {
	Name      string
	Base      bool
	Rules     []ruleInfo
	RulesRead bool
}

// ruleInfo is one rule: its handle and the chains its verdicts jump or go to.
type ruleInfo struct {
	Handle  uint64
	Targets []string
}

// ruleRef names a rule to delete.
type ruleRef struct {
	Chain  string
	Handle uint64
}

// tablePlan is what to remove from one table, in this order and in one transaction:
// the rules of kept chains that jump into removed chains, then the removed chains
// (flushed, then deleted).
type tablePlan struct {
	Table        string
	DeleteRules  []ruleRef
	DeleteChains []string
	// Kept lists kube-proxy chains left in place, with the reason; KeptChains their
	// names.
	Kept       []string
	KeptChains []string
}

func (p tablePlan) empty() bool { return len(p.DeleteRules) == 0 && len(p.DeleteChains) == 0 }

// planTable decides what to remove from t: every chain kube-proxy owns
// (isKubeProxyChain), and every rule of a base chain that jumps or goes to one of
// them (kube-proxy's hooks into PREROUTING, OUTPUT, POSTROUTING, INPUT, FORWARD).
// A kube-proxy chain that a regular chain of another program still jumps to is kept,
// with every chain it reaches: removing it would need that program's rule removed,
// and the kernel refuses to delete a chain that a rule still references.
func planTable(t tableInfo) tablePlan {
	p := tablePlan{Table: t.Name}
	remove := map[string]bool{}
	for _, c := range t.Chains {
		if isKubeProxyChain(c.Name) {
			remove[c.Name] = true
		}
	}
	// Keeping a chain keeps whatever it jumps to: repeat until nothing changes.
	for changed := true; changed; {
		changed = false
		for _, c := range t.Chains {
			if remove[c.Name] || c.Base {
				continue
			}
			for _, r := range c.Rules {
				for _, target := range r.Targets {
					if remove[target] {
						delete(remove, target)
						p.Kept = append(p.Kept, fmt.Sprintf("%s %s: chain %s jumps to it", t.Name, target, c.Name))
						p.KeptChains = append(p.KeptChains, target)
						changed = true
					}
				}
			}
		}
	}
	for _, c := range t.Chains {
		if remove[c.Name] {
			p.DeleteChains = append(p.DeleteChains, c.Name)
			continue
		}
		if !c.Base {
			continue
		}
		for _, r := range c.Rules {
			if jumpsInto(r, remove) {
				p.DeleteRules = append(p.DeleteRules, ruleRef{Chain: c.Name, Handle: r.Handle})
			}
		}
	}
	sort.Strings(p.DeleteChains)
	sort.Strings(p.Kept)
	sort.Strings(p.KeptChains)
	return p
}

func jumpsInto(r ruleInfo, chains map[string]bool) bool {
	for _, t := range r.Targets {
		if chains[t] {
			return true
		}
	}
	return false
}
