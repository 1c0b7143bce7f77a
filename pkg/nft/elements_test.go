package nft

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// TestElementConflicts: owners that render one element ID with different values get
// the lowest owner's value whatever the order, never a mix, and every step is a
// transaction the kernel accepts; when the winner goes the next owner's value takes
// effect in the same transaction.
func TestElementConflicts(t *testing.T) {
	type step struct {
		owner string
		f     Fragment
	}
	a := step{"a", svcFragment("svc-a", "10.96.0.1", "10.244.1.1", "10.244.1.2")}
	b := step{"b", svcFragment("svc-b", "10.96.0.1", "10.244.2.1")}
	c := step{"c", svcFragment("svc-c", "10.96.0.1", "10.244.3.1")}
	gone := func(owner string) step { return step{owner, Fragment{}} }
	twice := step{"a", Fragment{Chains: []*Chain{{Name: "svc-a"}, {Name: "svc-x"}}, Elements: []Element{
		{Set: "dispatch", Key: []Datum{ip("10.96.0.1"), Proto(ProtoTCP), Port(80)}, Verdict: &Verdict{Kind: Goto, Chain: "svc-a"}},
		{Set: "dispatch", Key: []Datum{ip("10.96.0.1"), Proto(ProtoTCP), Port(80)}, Verdict: &Verdict{Kind: Goto, Chain: "svc-x"}},
	}}}
	tests := []struct {
		name          string
		steps         []step
		wantDispatch  string   // chain the dispatch element of 10.96.0.1 goes to; "" for none
		wantConflicts []string // returned by the last SetFragment
		wantLeft      int      // Conflicts() after all steps
	}{
		{name: "lowest owner wins (added first)", steps: []step{a, b}, wantDispatch: "svc-a", wantConflicts: []string{"a>b"}, wantLeft: 1},
		{name: "lowest owner wins (added last)", steps: []step{b, a}, wantDispatch: "svc-a", wantConflicts: []string{"a>b"}, wantLeft: 1},
		{name: "three owners", steps: []step{c, b, a}, wantDispatch: "svc-a", wantConflicts: []string{"a>b", "a>c"}, wantLeft: 2},
		{name: "winner goes: next owner takes over", steps: []step{a, b, gone("a")}, wantDispatch: "svc-b"},
		{name: "winner goes: next lowest of several", steps: []step{c, a, b, gone("a")}, wantDispatch: "svc-b", wantLeft: 1},
		{name: "loser goes: winner stays", steps: []step{a, b, gone("b")}, wantDispatch: "svc-a"},
		{name: "all go", steps: []step{a, b, gone("b"), gone("a")}},
		{name: "loser re-renders: still loses, told again", steps: []step{a, b, {"b", svcFragment("svc-b", "10.96.0.1", "10.244.2.2")}},
			wantDispatch: "svc-a", wantConflicts: []string{"a>b"}, wantLeft: 1},
		{name: "same owner twice: first wins", steps: []step{twice}, wantDispatch: "svc-a", wantConflicts: []string{"a>a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := NewFake()
			r := newTestRuleset()
			v := NewView()
			var conflicts []ElementConflict
			for i, st := range tc.steps {
				conflicts = r.SetFragment(st.owner, st.f)
				tx := Plan(r, v)
				if i == 0 {
					tx = PlanFull(r, v)
				}
				if err := k.Apply(t.Context(), tx); err != nil {
					t.Fatalf("step %d (%s): kernel refused: %v", i, st.owner, err)
				}
				v.Commit(tx)
			}
			if got, want := k.Ruleset(FamilyIPv4, "t").Text(), r.Text(); got != want {
				t.Fatalf("kernel holds\n%s\nwant\n%s", got, want)
			}
			got := ""
			if e, ok := r.Element((Element{Set: "dispatch", Key: []Datum{ip("10.96.0.1"), Proto(ProtoTCP), Port(80)}}).ID()); ok {
				got = e.Verdict.Chain
			}
			if got != tc.wantDispatch {
				t.Fatalf("dispatch goes to %q, want %q", got, tc.wantDispatch)
			}
			var names []string
			for _, c := range conflicts {
				names = append(names, c.Winner+">"+c.Loser)
				if c.Kept.Verdict.Chain != "svc-"+c.Winner || c.String() == "" {
					t.Errorf("conflict %v", c)
				}
			}
			left := r.Conflicts()
			if len(left) != tc.wantLeft {
				t.Errorf("Conflicts() = %v, want %d", left, tc.wantLeft)
			}
			// All steps as one batch: what outlives it is every conflict left.
			if taken := r.TakeConflicts(); fmt.Sprint(taken) != fmt.Sprint(left) {
				t.Errorf("TakeConflicts() = %v, want %v", taken, left)
			}
			if again := r.TakeConflicts(); len(again) != 0 {
				t.Errorf("TakeConflicts() again = %v, want none", again)
			}
			if len(names) != len(tc.wantConflicts) {
				t.Fatalf("conflicts of the last step %q, want %q", names, tc.wantConflicts)
			}
			for i := range names {
				if names[i] != tc.wantConflicts[i] {
					t.Fatalf("conflicts of the last step %q, want %q", names, tc.wantConflicts)
				}
			}
		})
	}
}

// TestSharedEqualElementsAreNoConflict: owners adding the same element with the same
// value (an endpoint two Services share) share it; it goes with the last of them.
func TestSharedEqualElementsAreNoConflict(t *testing.T) {
	r := newTestRuleset()
	pair := Element{Set: "pairs", Key: []Datum{ip("10.244.1.1"), ip("10.244.1.1")}}
	if c := r.SetFragment("a", Fragment{Elements: []Element{pair}}); len(c) != 0 {
		t.Fatal(c)
	}
	if c := r.SetFragment("b", Fragment{Elements: []Element{pair, pair}}); len(c) != 0 {
		t.Fatal(c)
	}
	r.SetFragment("a", Fragment{})
	if _, ok := r.Element(pair.ID()); !ok {
		t.Fatal("element removed while b still adds it")
	}
	r.SetFragment("b", Fragment{})
	if _, ok := r.Element(pair.ID()); ok {
		t.Fatal("element kept after its last owner left")
	}
}

// An owner's elements after a duplicate of its own are kept: setElements uses the
// rendered list as it is until the first duplicate, then a copy.
func TestOwnDuplicateKeepsTheRest(t *testing.T) {
	r := newTestRuleset()
	key := []Datum{ip("10.96.0.1"), Proto(ProtoTCP), Port(80)}
	conflicts := r.SetFragment("a", Fragment{Chains: []*Chain{{Name: "svc-a"}, {Name: "svc-x"}}, Elements: []Element{
		{Set: "ips", Key: []Datum{ip("10.96.0.1")}},
		{Set: "dispatch", Key: key, Verdict: &Verdict{Kind: Goto, Chain: "svc-a"}},
		{Set: "dispatch", Key: key, Verdict: &Verdict{Kind: Goto, Chain: "svc-x"}},
		{Set: "ips", Key: []Datum{ip("10.96.0.2")}},
		{Set: "ips", Key: []Datum{ip("10.96.0.1")}},
		{Set: "ips", Key: []Datum{ip("10.96.0.3")}},
	}})
	if len(conflicts) != 1 {
		t.Errorf("conflicts %v, want the dispatch element's only", conflicts)
	}
	text := r.Text()
	for _, want := range []string{"10.96.0.1", "10.96.0.2", "10.96.0.3", "goto svc-a"} {
		if !strings.Contains(text, want) {
			t.Errorf("ruleset lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "goto svc-x") {
		t.Errorf("the second version of the dispatch element won:\n%s", text)
	}
}

// TestTakeConflictsReportsTheBatch: TakeConflicts tells the conflicts among the
// elements the SetFragment calls since the last one changed that are still there:
// neither a hand-over within the batch nor a conflict the batch did not touch,
// however many elements owners share.
func TestTakeConflictsReportsTheBatch(t *testing.T) {
	r := newTestRuleset()
	names := func(cs []ElementConflict) string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Winner+">"+c.Loser)
		}
		return strings.Join(out, " ")
	}
	// Owners sharing equal elements (the pairs of 10.244.1.1) are no conflict.
	r.SetFragment("a", svcFragment("svc-a", "10.96.0.1", "10.244.1.1"))
	r.SetFragment("b", svcFragment("svc-b", "10.96.0.1", "10.244.1.1"))
	r.SetFragment("x", svcFragment("svc-x", "10.96.0.9", "10.244.1.1"))
	if got := names(r.TakeConflicts()); got != "a>b" {
		t.Fatalf("first batch: %q, want a>b", got)
	}
	steps := []struct {
		name string
		do   func()
		want string
	}{
		{"an owner not in the conflict changes", func() { r.SetFragment("x", svcFragment("svc-x", "10.96.0.9", "10.244.1.2")) }, ""},
		{"the loser re-renders", func() { r.SetFragment("b", svcFragment("svc-b", "10.96.0.1", "10.244.1.3")) }, "a>b"},
		{"the winner re-renders", func() { r.SetFragment("a", svcFragment("svc-a", "10.96.0.1", "10.244.1.4")) }, "a>b"},
		{"hand-over within the batch", func() {
			r.SetFragment("c", svcFragment("svc-c", "10.96.0.1", "10.244.1.5")) // loses to a
			r.SetFragment("a", Fragment{})                                      // b takes over, c loses to b
			r.SetFragment("c", Fragment{})                                      // and goes
		}, ""},
		{"the winner goes, the loser is left alone", func() {
			r.SetFragment("c", svcFragment("svc-c", "10.96.0.1", "10.244.1.5"))
			r.TakeConflicts()
			r.SetFragment("b", Fragment{})
		}, ""},
		{"two losers, the winner goes", func() {
			r.SetFragment("a", svcFragment("svc-a", "10.96.0.1"))
			r.SetFragment("b", svcFragment("svc-b", "10.96.0.1"))
			r.TakeConflicts()
			r.SetFragment("a", Fragment{})
		}, "b>c"},
	}
	for _, st := range steps {
		st.do()
		if got := names(r.TakeConflicts()); got != st.want {
			t.Errorf("%s: %q, want %q", st.name, got, st.want)
		}
	}
	if got := names(r.Conflicts()); got != "b>c" {
		t.Errorf("Conflicts() at the end = %q, want b>c", got)
	}
}

// TestSetFragmentAllocatesPerOwner: rendering an owner's elements allocates per
// owner (its arena, its spans, the map of its IDs), not per element. Each element
// put was once moved to the heap by an address taken for undeclared sets only
// (keepUndeclared): 223 allocations for these 200 elements, instead of 23.
func TestSetFragmentAllocatesPerOwner(t *testing.T) {
	r := newTestRuleset()
	var f Fragment
	for i := range 200 {
		f.Elements = append(f.Elements, Element{Set: "ips", Key: []Datum{IP(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}))}})
	}
	allocs := testing.AllocsPerRun(20, func() {
		r.SetFragment("a", f)
		r.SetFragment("a", Fragment{})
	})
	if allocs > 100 {
		t.Fatalf("%v allocations to add and remove an owner of %d elements: some are per element", allocs, len(f.Elements))
	}
}
