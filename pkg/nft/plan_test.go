package nft

import (
	"net/netip"
	"testing"
	"time"
)

func ip(s string) Datum { return IP(netip.MustParseAddr(s)) }

func svcFragment(chain, clusterIP string, eps ...string) Fragment {
	var rules []Rule
	for _, e := range eps {
		rules = append(rules, Rule{Stmts: []Stmt{DNAT{Addr: netip.MustParseAddr(e), Port: 80}}})
	}
	f := Fragment{
		Chains: []*Chain{{Name: chain, Rules: rules}},
		Elements: []Element{
			{Set: "ips", Key: []Datum{ip(clusterIP)}},
			{Set: "dispatch", Key: []Datum{ip(clusterIP), Proto(ProtoTCP), Port(80)}, Verdict: &Verdict{Kind: Goto, Chain: chain}},
		},
	}
	for _, e := range eps {
		f.Elements = append(f.Elements, Element{Set: "pairs", Key: []Datum{ip(e), ip(e)}})
	}
	return f
}

func newTestRuleset() *Ruleset {
	return NewRuleset(FamilyIPv4, "t",
		&Set{Name: "ips", Key: []DataType{TypeIPv4Addr}},
		&Set{Name: "pairs", Key: []DataType{TypeIPv4Addr, TypeIPv4Addr}},
		&Set{Name: "dispatch", Key: []DataType{TypeIPv4Addr, TypeInetProto, TypeInetService}, Verdict: true})
}

type txCounts struct{ addSets, newChains, chains, delChains, addElems, delElems int }

func countsOf(tx *Tx) txCounts {
	return txCounts{len(tx.AddSets), len(tx.NewChains), len(tx.Chains), len(tx.DelChains), len(tx.Added()), len(tx.DelElements)}
}

func TestPlanIsIncremental(t *testing.T) {
	tests := []struct {
		name   string
		change func(r *Ruleset)
		want   txCounts
	}{
		{"nothing changed", func(r *Ruleset) {}, txCounts{}},
		{"endpoints of one service change", func(r *Ruleset) {
			r.SetFragment("a", svcFragment("svc-a", "10.96.0.1", "10.244.1.1", "10.244.1.3"))
		}, txCounts{chains: 1, addElems: 1, delElems: 1}},
		{"same content set again", func(r *Ruleset) {
			r.SetFragment("a", svcFragment("svc-a", "10.96.0.1", "10.244.1.1", "10.244.1.2"))
		}, txCounts{}},
		{"service added", func(r *Ruleset) {
			r.SetFragment("c", svcFragment("svc-c", "10.96.0.3", "10.244.3.1"))
		}, txCounts{newChains: 1, chains: 1, addElems: 3}},
		{"service removed, shared endpoint pair stays", func(r *Ruleset) {
			r.SetFragment("b", Fragment{})
		}, txCounts{delChains: 1, delElems: 2}},
		{"cluster IP changes: element deleted and added", func(r *Ruleset) {
			r.SetFragment("a", svcFragment("svc-a", "10.96.0.9", "10.244.1.1", "10.244.1.2"))
		}, txCounts{addElems: 2, delElems: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := NewFake()
			r := newTestRuleset()
			r.SetFragment("a", svcFragment("svc-a", "10.96.0.1", "10.244.1.1", "10.244.1.2"))
			// b shares endpoint 10.244.1.1 with a.
			r.SetFragment("b", svcFragment("svc-b", "10.96.0.2", "10.244.1.1"))
			v := NewView()
			first := PlanFull(r, v)
			if got := countsOf(first); got.addSets != 3 || got.newChains != 2 || got.addElems != 6 {
				t.Fatalf("first plan = %+v", got)
			}
			if err := k.Apply(t.Context(), first); err != nil {
				t.Fatal(err)
			}
			v.Commit(first)
			tc.change(r)
			tx := Plan(r, v)
			if got := countsOf(tx); got != tc.want {
				t.Fatalf("plan = %+v, want %+v", got, tc.want)
			}
			if err := k.Apply(t.Context(), tx); err != nil {
				t.Fatalf("fake kernel refused the plan: %v", err)
			}
			v.Commit(tx)
			kv, _ := k.Read(t.Context(), FamilyIPv4, "t")
			if full := PlanFull(r, kv); !full.Empty() {
				t.Fatalf("kernel and desired differ after apply: %+v", countsOf(full))
			}
		})
	}
}

func TestRequeueRetriesRefusedChanges(t *testing.T) {
	k := NewFake()
	r := newTestRuleset()
	r.SetFragment("a", svcFragment("svc-a", "10.96.0.1", "10.244.1.1"))
	v := NewView()
	k.FailNext = 1
	tx := PlanFull(r, v)
	if err := k.Apply(t.Context(), tx); err == nil {
		t.Fatal("injected failure did not fail")
	}
	r.Requeue(tx)
	retry := Plan(r, v)
	if countsOf(retry) != countsOf(tx) {
		t.Fatalf("retry %+v differs from refused %+v", countsOf(retry), countsOf(tx))
	}
	if err := k.Apply(t.Context(), retry); err != nil {
		t.Fatal(err)
	}
}

func TestDriftIsRepairedByFullPlan(t *testing.T) {
	k := NewFake()
	r := newTestRuleset()
	r.SetFragment("a", svcFragment("svc-a", "10.96.0.1", "10.244.1.1"))
	tx := PlanFull(r, NewView())
	if err := k.Apply(t.Context(), tx); err != nil {
		t.Fatal(err)
	}
	k.Tamper(FamilyIPv4, "t", "svc-a")
	kv, _ := k.Read(t.Context(), FamilyIPv4, "t")
	repair := PlanFull(r, kv)
	if len(repair.NewChains) != 1 || len(repair.Added()) != 1 {
		t.Fatalf("repair = %+v, want the chain and its dispatch element back", countsOf(repair))
	}
	if err := k.Apply(t.Context(), repair); err != nil {
		t.Fatal(err)
	}
	if c, ok := k.Chain(FamilyIPv4, "t", "svc-a"); !ok || len(c.Rules) != 1 {
		t.Fatalf("chain not repaired: %v", c)
	}
}

func TestFormatting(t *testing.T) {
	tests := []struct{ got, want string }{
		{formatDuration(3 * time.Hour), "3h"},
		{formatDuration(10800 * time.Second), "3h"},
		{formatDuration(90 * time.Second), "1m30s"},
		{formatDuration(86400*time.Second + time.Second), "1d1s"},
		{ip("10.0.0.1").String(), "10.0.0.1"},
		{Proto(ProtoSCTP).String(), "sctp"},
		{Port(8080).String(), "8080"},
		{Mark(0x4000).String(), "0x00004000"},
		{ip("10.244.1.2").untypedString(), "0xaf40102 [invalid type]"},
		{Numgen{Mod: 3, Value: 0}.String(), "numgen random mod 3 0"},
		{MatchPrefix{Field: FieldIPSaddr, Negate: true, Prefix: netip.MustParsePrefix("10.244.3.4/16")}.String(), "ip saddr != 10.244.0.0/16"},
		{priorityText("prerouting", -100), "dstnat"},
		{priorityText("output", -100), "-100"},
		{priorityText("postrouting", 100), "srcnat"},
		{priorityText("prerouting", -110), "-110"},
		{priorityText("prerouting", -95), "dstnat + 5"},
		{priorityText("output", 0), "filter"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestNormalizeListingIsStableForText(t *testing.T) {
	r := sampleRuleset()
	if got := NormalizeListing(r.Text()); got != r.Text() {
		t.Fatalf("NormalizeListing(Text) changed the text:\n%s\nvs\n%s", got, r.Text())
	}
	shuffled := "table ip x {\n\tchain b {\n\t}\n\n\tset a {\n\t\ttype ipv4_addr\n\t\telements = { 10.0.0.2,\n\t\t\t     10.0.0.1 }\n\t}\n}\n"
	want := "table ip x {\n\tset a {\n\t\ttype ipv4_addr\n\t\telements = { 10.0.0.1,\n\t\t\t     10.0.0.2 }\n\t}\n\n\tchain b {\n\t}\n}\n"
	if got := NormalizeListing(shuffled); got != want {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
}

func TestSharedChainsLiveWhileAnyOwnerUsesThem(t *testing.T) {
	k := NewFake()
	r := newTestRuleset()
	lb := &Chain{Name: "lb-1", Rules: []Rule{{Stmts: []Stmt{DNAT{Addr: netip.MustParseAddr("10.244.1.1"), Port: 80}}}}}
	use := func(owner, clusterIP string) Fragment {
		return Fragment{Shared: []*Chain{lb}, Elements: []Element{{Set: "dispatch",
			Key: []Datum{ip(clusterIP), Proto(ProtoTCP), Port(80)}, Verdict: &Verdict{Kind: Goto, Chain: "lb-1"}}}}
	}
	v := NewView()
	apply := func() {
		t.Helper()
		tx := Plan(r, v)
		if err := k.Apply(t.Context(), tx); err != nil {
			t.Fatalf("kernel refused: %v", err)
		}
		v.Commit(tx)
	}
	r.SetFragment("a", use("a", "10.96.0.1"))
	r.SetFragment("b", use("b", "10.96.0.2"))
	apply()
	r.SetFragment("a", Fragment{})
	apply()
	if _, ok := k.Chain(FamilyIPv4, "t", "lb-1"); !ok {
		t.Fatal("shared chain deleted while b still uses it")
	}
	r.SetFragment("b", Fragment{})
	apply()
	if _, ok := k.Chain(FamilyIPv4, "t", "lb-1"); ok {
		t.Fatal("shared chain left behind after its last user went")
	}
	// One owner's transaction alone must be able to create the chain it needs.
	r.SetFragment("a", use("a", "10.96.0.1"))
	r.SetFragment("b", use("b", "10.96.0.2"))
	tx := PlanOwners(r, v, "b")
	if err := k.Apply(t.Context(), tx); err != nil {
		t.Fatalf("b alone: %v", err)
	}
	v.Commit(tx)
}

// TestFullPlanWalksANewOwnersElementsOnce: a cold start's first sync is a full
// one, which marks every owner's elements after their new fragments did; each
// element is still walked once (counted by the room the plan reserves).
func TestFullPlanWalksANewOwnersElementsOnce(t *testing.T) {
	r := newTestRuleset()
	r.SetFragment("svc/a", svcFragment("svc-a", "10.96.0.1", "10.0.0.1", "10.0.0.2"))
	r.SetFragment("svc/b", svcFragment("svc-b", "10.96.0.2", "10.0.0.3"))
	tx := PlanFull(r, NewView())
	if got := len(tx.Added()); got != 7 {
		t.Fatalf("%d elements added, want 7", got)
	}
	if got := cap(tx.adds); got != 7 {
		t.Errorf("room for %d elements reserved, want 7: marked elements were walked twice", got)
	}
}

// TestChangesCompatible: only the chains marked since the last plan are compared
// with the kernel's, the sets and the table's flags always.
func TestChangesCompatible(t *testing.T) {
	hook := &ChainHook{Type: "nat", Hook: "prerouting", Priority: -100}
	setA := &Set{Name: "a", Key: []DataType{TypeIPv4Addr}}
	build := func() (*Ruleset, *View) {
		r := NewRuleset(FamilyIPv4, "t", setA)
		r.SetFragment("o", Fragment{Chains: []*Chain{{Name: "base", Hook: hook}, {Name: "plain"}}})
		v := NewView()
		v.Commit(Plan(r, v))
		return r, v
	}
	for _, tc := range []struct {
		name   string
		change func(r *Ruleset, v *View)
		want   bool
	}{
		{"nothing", func(*Ruleset, *View) {}, true},
		{"an unmarked chain hooked in the view (not read back: not looked at)", func(r *Ruleset, v *View) {
			v.Chains["plain"] = ChainView{Hook: hook}
		}, true},
		{"the same, read back", func(r *Ruleset, v *View) {
			v.Chains["plain"] = ChainView{Hook: hook}
			r.MarkAllDirty(v)
		}, false},
		{"the same, read back as a part", func(r *Ruleset, v *View) {
			v.Chains["plain"] = ChainView{Hook: hook}
			r.MarkPartsDirty(v, Parts{Chains: map[string]bool{"plain": true}})
		}, false},
		{"a new chain under the name of a base chain of the view", func(r *Ruleset, v *View) {
			v.Chains["new"] = ChainView{Hook: hook}
			r.SetFragment("p", Fragment{Chains: []*Chain{{Name: "new"}}})
		}, false},
		{"a base chain's hook changed", func(r *Ruleset, v *View) {
			r.SetFragment("o", Fragment{Chains: []*Chain{{Name: "base", Hook: &ChainHook{Type: "nat", Hook: "output", Priority: -100}}, {Name: "plain"}}})
		}, false},
		{"a set redefined in the view", func(r *Ruleset, v *View) {
			v.Sets["a"] = &Set{Name: "a", Key: []DataType{TypeIPv6Addr}}
		}, false},
		{"table flags", func(r *Ruleset, v *View) { v.TableFlags = 1 }, false},
	} {
		r, v := build()
		tc.change(r, v)
		if got := ChangesCompatible(r, v); got != tc.want {
			t.Errorf("%s: ChangesCompatible = %v, want %v", tc.name, got, tc.want)
		}
	}
}
