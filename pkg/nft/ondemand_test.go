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

	r.SetFragment("a", Fragment{})
	r.SetFragment("b", Fragment{})
	step([]string{"a"}, nil, nil)                      // b's chain may still name dyn in the kernel
	step([]string{"b"}, nil, []string{"dyn", "shard"}) // the last owner's transaction
	if len(v.Elements) != 0 {
		t.Fatalf("view keeps elements of deleted sets: %v", v.Elements)
	}
}
