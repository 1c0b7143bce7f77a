package nft

import (
	"net/netip"
	"slices"
	"testing"
)

// TestOnDemandSets: a set declared on demand is planned while it holds elements or
// a chain refers to it; once unneeded it is deleted with the last owners' changes,
// never while an owner not yet planned may still have a kernel chain naming it.
func TestOnDemandSets(t *testing.T) {
	ip := func(s string) Datum { return IP(netip.MustParseAddr(s)) }
	shard := &Set{Name: "shard", Key: []DataType{TypeIPv4Addr}}
	dyn := &Set{Name: "dyn", Key: []DataType{TypeIPv4Addr}, Dynamic: true}
	r := NewRuleset(FamilyIPv4, "t", &Set{Name: "fixed", Key: []DataType{TypeIPv4Addr}})
	r.DeclareOnDemand(shard, dyn)
	v := NewView()
	step := func(owners []string, wantAdd, wantDel []string) {
		t.Helper()
		var tx *Tx
		if owners == nil {
			tx = Plan(r, v)
		} else {
			tx = PlanOwners(r, v, owners...)
		}
		var added []string
		for _, s := range tx.AddSets {
			added = append(added, s.Name)
		}
		if !slices.Equal(added, wantAdd) || !slices.Equal(tx.DelSets, wantDel) {
			t.Fatalf("owners %v: sets added %v, deleted %v; want %v, %v", owners, added, tx.DelSets, wantAdd, wantDel)
		}
		v.Commit(tx)
	}
	step(nil, []string{"fixed"}, nil)

	r.SetFragment("a", Fragment{Elements: []Element{{Set: "shard", Key: []Datum{ip("10.0.0.1")}}}})
	r.SetFragment("b", Fragment{Chains: []*Chain{{Name: "c", Rules: []Rule{{Stmts: []Stmt{Lookup{Key: []Operand{F(FieldIPSaddr)}, Set: "dyn"}}}}}}})
	step(nil, []string{"dyn", "shard"}, nil)
	// Every plan asks: only the map returned is allocated.
	if n := testing.AllocsPerRun(50, func() { r.PresentSets() }); n > 2 {
		t.Errorf("PresentSets allocates %v times", n)
	}

	r.SetFragment("a", Fragment{})
	r.SetFragment("b", Fragment{})
	step([]string{"a"}, nil, nil)                      // b's chain may still name dyn in the kernel
	step([]string{"b"}, nil, []string{"dyn", "shard"}) // the last owner's transaction
	if len(v.Elements) != 0 {
		t.Fatalf("view keeps elements of deleted sets: %v", v.Elements)
	}
}

// TestPresentSetsFollowsRules: an empty set declared on demand is present exactly
// while a rule of the ruleset names it, through chains replaced, shared between
// owners and dropped.
func TestPresentSetsFollowsRules(t *testing.T) {
	r := NewRuleset(FamilyIPv4, "t")
	r.DeclareOnDemand(&Set{Name: "m", Key: []DataType{TypeIPv4Addr}, Verdict: true}, &Set{Name: "n", Key: []DataType{TypeIPv4Addr}})
	naming := func(chain string, sets ...string) *Chain {
		c := &Chain{Name: chain}
		for _, s := range sets {
			c.Rules = append(c.Rules, Rule{Stmts: []Stmt{VMap{Key: []Operand{F(FieldIPDaddr)}, Map: s}}})
		}
		return c
	}
	want := func(step string, sets ...string) {
		t.Helper()
		var got []string
		for name := range r.PresentSets() {
			got = append(got, name)
		}
		slices.Sort(got)
		if !slices.Equal(got, sets) {
			t.Fatalf("%s: present sets %v, want %v", step, got, sets)
		}
	}
	want("nothing")
	r.SetFragment("a", Fragment{Chains: []*Chain{naming("ca", "m", "m")}})
	want("a rule naming m twice", "m")
	r.SetFragment("a", Fragment{Chains: []*Chain{naming("ca", "n")}})
	want("the chain replaced", "n")
	r.SetFragment("x", Fragment{Shared: []*Chain{naming("s", "m")}})
	r.SetFragment("y", Fragment{Shared: []*Chain{naming("s", "m")}})
	r.SetFragment("a", Fragment{})
	want("a gone, s shared", "m")
	r.SetFragment("x", Fragment{})
	want("one owner of s left", "m")
	r.SetFragment("y", Fragment{Elements: []Element{{Set: "n", Key: []Datum{IP(netip.MustParseAddr("10.0.0.1"))}}}})
	want("s gone, an element in n", "n")
	r.SetFragment("y", Fragment{})
	want("all gone")
}
