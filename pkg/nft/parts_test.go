package nft

import (
	"testing"
)

// A repair of named parts compares exactly those: the kernel view of a flushed
// set and a chain another program changed is replaced by what was read back, and
// the plan re-adds the set's elements, deletes the element the other program
// added, and rewrites the chain; nothing else is compared or written.
func TestReplacePartsPlansOnlyTheNamedParts(t *testing.T) {
	r := newTestRuleset()
	r.SetFragment("a", svcFragment("svc-a", "10.96.0.1", "10.244.1.1", "10.244.1.2"))
	r.SetFragment("b", svcFragment("svc-b", "10.96.0.2", "10.244.2.1"))
	v := NewView()
	r.Bind(v)
	tx := PlanFull(r, v)
	v.Commit(tx)
	if tx := Plan(r, v); !tx.Empty() {
		t.Fatalf("a plan after the commit is not empty: %+v", countsOf(tx))
	}

	// What another program left, as ReadParts returns it: the dispatch map holds
	// only a stranger, svc-a's chain lost its rules. The ips set and svc-b are
	// not named (and so, as far as the view knows, unchanged).
	stranger := Element{Set: "dispatch", Key: []Datum{ip("10.96.0.9"), Proto(ProtoTCP), Port(80)}, Verdict: &Verdict{Kind: Drop}}
	part := NewView()
	part.TableExists = true
	part.Sets["dispatch"] = r.Sets["dispatch"]
	part.Elements[stranger.ID()] = valueHash(stranger)
	part.Chains["svc-a"] = ChainView{Rules: []uint64{}, Exprs: []uint64{}}
	p := Parts{Chains: map[string]bool{"svc-a": true}, Sets: map[string]bool{"dispatch": true}}
	v.ReplaceParts(part, p)
	r.MarkPartsDirty(v, p)
	tx = Plan(r, v)
	if got, want := countsOf(tx), (txCounts{chains: 1, addElems: 2, delElems: 1}); got != want {
		t.Fatalf("plan %+v, want %+v", got, want)
	}
	if tx.DelElements[0].ID() != stranger.ID() {
		t.Fatalf("deletes %v, want the stranger", tx.DelElements[0])
	}
	for _, e := range tx.Added() {
		if e.Set != "dispatch" {
			t.Fatalf("adds %v, outside the named set", e)
		}
	}
	v.Commit(tx)
	if tx := PlanFull(r, v); !tx.Empty() {
		t.Fatalf("a full plan after the repair is not empty: %+v", countsOf(tx))
	}
}

// A part read that finds the table gone empties the view.
func TestReplacePartsOfAMissingTable(t *testing.T) {
	r := newTestRuleset()
	r.SetFragment("a", svcFragment("svc-a", "10.96.0.1", "10.244.1.1"))
	v := NewView()
	r.Bind(v)
	v.Commit(PlanFull(r, v))
	v.ReplaceParts(NewView(), Parts{Table: true})
	if v.TableExists || len(v.Chains) != 0 || len(v.Sets) != 0 {
		t.Fatalf("view after the table went: exists %v, %d chains, %d sets", v.TableExists, len(v.Chains), len(v.Sets))
	}
	if got, want := countsOf(PlanFull(r, v)), (txCounts{addSets: 3, newChains: 1, chains: 1, addElems: 3}); got != want {
		t.Fatalf("plan %+v, want %+v", got, want)
	}
}
