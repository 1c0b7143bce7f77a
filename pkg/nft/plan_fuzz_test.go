package nft

import (
	"context"
	"net/netip"
	"testing"
)

// kernelDraw builds an arbitrary table content from fuzz bytes: the desired objects,
// some dropped, changed or redefined, plus foreign sets, chains, rules and elements.
type kernelDraw struct {
	b []byte
}

func (d *kernelDraw) next() byte {
	if len(d.b) == 0 {
		return 0
	}
	x := d.b[0]
	d.b = d.b[1:]
	return x
}

func (d *kernelDraw) pick(n int) int { return int(d.next()) % n }

var foreignSets = []*Set{
	{Name: "foreign"}, // a type svcproxy cannot represent
	{Name: "fips", Key: []DataType{TypeIPv4Addr}},                    // our types, not our set
	{Name: "fvmap", Key: []DataType{TypeInetService}, Verdict: true}, // a verdict map of its own
	{Name: "ips", Key: []DataType{TypeIPv4Addr, TypeInetService}},    // one of our names redefined
	{Name: "dispatch", Key: []DataType{TypeIPv4Addr}, Verdict: true}, // idem
	{Name: "sticky", Key: []DataType{TypeIPv4Addr}, Dynamic: true},   // idem
	{Name: "backends", Key: []DataType{TypeIPv4Addr}, Data: []DataType{TypeIPv4Addr}},
}

// fakeWith returns a fake kernel holding what the draw describes, and that content's
// chains by name.
func fakeWith(desired *Ruleset, d *kernelDraw) *Fake {
	t := &fakeTable{view: NewView(), chains: map[string]*Chain{}, elems: map[string]Element{}}
	t.view.TableExists = true
	if d.pick(8) == 0 {
		t.view.TableFlags = 1 // dormant
	}
	for _, name := range sortedKeys(desired.Sets) {
		if d.pick(4) != 0 {
			t.view.Sets[name] = desired.Sets[name]
		}
	}
	for i, n := 0, d.pick(4); i < n; i++ {
		s := foreignSets[d.pick(len(foreignSets))]
		t.view.Sets[s.Name] = s
	}
	foreignRule := Rule{Stmts: []Stmt{Verdict{Kind: Accept}}, Comment: "not ours"}
	for _, name := range sortedKeys(desired.Chains) {
		want := desired.Chains[name]
		c := &Chain{Name: name, Hook: want.Hook, Rules: append([]Rule(nil), want.Rules...)}
		switch d.pick(8) {
		case 0:
			continue // missing
		case 1:
			c.Rules = append(c.Rules, foreignRule)
		case 2:
			c.Rules = nil
		case 3:
			if c.Hook == nil {
				c.Hook = &ChainHook{Type: "filter", Hook: "input"}
			} else {
				c.Hook = &ChainHook{Type: c.Hook.Type, Hook: c.Hook.Hook, Priority: c.Hook.Priority + 1}
			}
		}
		t.chains[name] = c
		t.view.Chains[name] = chainViewOf(c)
	}
	for i, n := 0, d.pick(4); i < n; i++ {
		c := &Chain{Name: []string{"a-foreign", "z-foreign", "fchain"}[d.pick(3)]}
		if d.pick(2) == 0 {
			c.Rules = []Rule{foreignRule}
		}
		t.chains[c.Name] = c
		t.view.Chains[c.Name] = chainViewOf(c)
	}
	for _, e := range desired.Elements() {
		s := t.view.Sets[e.Set]
		if s == nil || !setsEqual(s, desired.Sets[e.Set]) {
			continue
		}
		switch d.pick(6) {
		case 0:
			continue
		case 1:
			e.Comment += "?"
		}
		t.elems[e.ID()] = e
	}
	for i, n := 0, d.pick(6); i < n; i++ {
		a := netip.AddrFrom4([4]byte{10, 99, d.next(), d.next()})
		var e Element
		switch d.pick(3) {
		case 0:
			e = Element{Set: "fips", Key: []Datum{IP(a)}}
		case 1:
			e = Element{Set: "ips", Key: []Datum{IP(a)}}
		default:
			e = Element{Set: "fvmap", Key: []Datum{Port(uint16(d.next()))}, Verdict: &Verdict{Kind: Drop}}
			if d.pick(2) == 0 {
				if _, ok := t.chains["fchain"]; ok {
					e.Verdict = &Verdict{Kind: Jump, Chain: "fchain"}
				}
			}
		}
		if s := t.view.Sets[e.Set]; s == nil || len(s.Key) != len(e.Key) || s.Key[0] != e.Key[0].Type || s.Verdict != (e.Verdict != nil) {
			continue
		}
		t.elems[e.ID()] = e
	}
	f := NewFake()
	f.tables[fakeKey(desired.Family, desired.Table)] = t
	return f
}

// FuzzPlan plans against an arbitrary kernel table, as the sync loop does (recreate
// when Compatible says so), applies to the fake kernel and checks that it converged.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Add([]byte{0, 3, 3, 1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5, 2, 2, 2, 2, 5, 5, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		desired := sampleRuleset()
		k := fakeWith(desired, &kernelDraw{b: data})
		before := k.tables[fakeKey(desired.Family, desired.Table)]
		v, err := k.Read(context.Background(), desired.Family, desired.Table)
		if err != nil {
			t.Fatal(err)
		}
		tx := PlanFull(desired, v)
		if !Compatible(desired, v) {
			tx = PlanFull(desired, NewView())
			tx.Recreate = true
		} else {
			// In place, no element that already held the right value is deleted:
			// traffic to existing Services never sees a gap.
			for _, e := range tx.DelElements {
				if cur, ok := before.elems[e.ID()]; ok {
					if want, ok := desired.Element(e.ID()); ok && elementsEqual(cur, want) {
						t.Fatalf("plan deletes element %v that already holds the desired value", e)
					}
				}
			}
		}
		if err := k.Apply(context.Background(), tx); err != nil {
			t.Fatalf("apply (recreate=%v): %v", tx.Recreate, err)
		}
		v, err = k.Read(context.Background(), desired.Family, desired.Table)
		if err != nil {
			t.Fatal(err)
		}
		if again := PlanFull(desired, v); !again.Empty() || !Compatible(desired, v) {
			t.Fatalf("not converged after one transaction: %+v", again)
		}
		if got, want := k.Ruleset(desired.Family, desired.Table).Text(), desired.Text(); got != want {
			t.Fatalf("fake holds\n%s\nwant\n%s", got, want)
		}
	})
}
