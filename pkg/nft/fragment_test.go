package nft

import (
	"fmt"
	"testing"
)

// TestSetFragmentKeepsNoElementMemory: a renderer reuses its fragment's memory
// (Reset) for the next owner, so what the ruleset keeps of an owner's elements
// (a version waiting behind a lower owner's, an element of a set it does not
// declare, a conflict) must be its own copy.
func TestSetFragmentKeepsNoElementMemory(t *testing.T) {
	r := NewRuleset(FamilyIPv4, "t", &Set{Name: "m", Key: []DataType{TypeIPv4Addr}, Data: []DataType{TypeIPv4Addr}})
	var f Fragment
	render := func(key, val string) Fragment {
		f.Reset()
		f.Elements = append(f.Elements,
			Element{Set: "m", Key: f.Datums(ip(key)), Data: f.Datums(ip(val))},
			Element{Set: "undeclared", Key: f.Datums(ip(key)), Data: f.Datums(ip(val))})
		return f
	}
	r.SetFragment("a", render("10.0.0.1", "10.1.0.1"))
	// b's versions differ: a's stay in effect, b's wait.
	conflicts := r.SetFragment("b", render("10.0.0.1", "10.2.0.2"))
	r.SetFragment("c", render("10.9.9.9", "10.9.9.9")) // overwrites the memory of both renders
	if len(conflicts) == 0 {
		t.Fatal("no conflict reported for b's versions")
	}
	for _, c := range conflicts {
		if got := joinData(c.Dropped.Data); got != "10.2.0.2" {
			t.Errorf("conflict's dropped value %s, want b's 10.2.0.2", got)
		}
	}
	r.SetFragment("a", Fragment{}) // b's versions take effect
	for _, set := range []string{"m", "undeclared"} {
		id := Element{Set: set, Key: []Datum{ip("10.0.0.1")}}.ID()
		e, ok := r.Element(id)
		if !ok {
			t.Fatalf("%s: element gone with a, want b's", set)
		}
		if got := joinData(e.Data); got != "10.2.0.2" {
			t.Errorf("%s: value %s after a left, want b's 10.2.0.2", set, got)
		}
	}
}

// TestCommitAfterTheTableMoved: Commit records the kernel's hash through each
// add's entry pointer only while the element table has not moved entries since
// the plan; after a resize it must look them up.
func TestCommitAfterTheTableMoved(t *testing.T) {
	r := newTestRuleset()
	v := NewView()
	r.Bind(v)
	r.SetFragment("a", svcFragment("svc-a", "10.96.0.1", "10.244.0.1"))
	tx := Plan(r, v)
	for i := range 200 { // grows the table: every entry moves
		r.SetFragment(fmt.Sprint("b", i), svcFragment(fmt.Sprint("svc-b", i), fmt.Sprintf("10.96.1.%d", i), fmt.Sprintf("10.244.1.%d", i)))
	}
	v.Commit(tx)
	for _, e := range tx.Added() {
		if _, ok := v.hash(e.ID()); !ok {
			t.Errorf("%s %s: not recorded as in the kernel", e.Set, e)
		}
	}
}
