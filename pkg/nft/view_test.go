package nft

import (
	"hash/fnv"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// TestValueHashIsFNV: valueHash, computed in place, is the FNV-1a of the value's
// bytes, verdict and comment as the view has always hashed them; and so is
// rawValueHash of the value's encoding, which the plan compares with the view's
// hash of what the kernel holds (a difference would rewrite every element).
func TestValueHashIsFNV(t *testing.T) {
	reference := func(e Element) uint64 {
		h := fnv.New64a()
		h.Write(concatBytes(e.Data))
		if e.Verdict != nil {
			h.Write([]byte{0, byte(e.Verdict.Kind)})
			h.Write([]byte(e.Verdict.Chain))
		}
		h.Write([]byte{0})
		h.Write([]byte(limitComment(e.Comment)))
		return h.Sum64()
	}
	ip := IP(netip.MustParseAddr("10.244.1.3"))
	ip6 := IP(netip.MustParseAddr("fd00::3"))
	for _, e := range []Element{
		{},
		{Data: []Datum{ip}},
		{Data: []Datum{ip, Port(8080)}},
		{Data: []Datum{ip6, Port(8080)}},
		{Data: []Datum{Proto(ProtoTCP), Port(80)}},
		{Verdict: &Verdict{Kind: Goto, Chain: "lb-2-10"}, Comment: "ns/svc:http/TCP"},
		{Verdict: &Verdict{Kind: Drop}},
		{Data: []Datum{ip}, Comment: "a \"quoted\" comment", Timeout: 3 * time.Second},
	} {
		if got, want := valueHash(e), reference(e); got != want {
			t.Errorf("valueHash(%v) = %x, want %x", e, got, want)
		}
		if got, want := rawValueHash(encodeValue(&e)), reference(e); got != want {
			t.Errorf("rawValueHash(encodeValue(%v)) = %x, want %x", e, got, want)
		}
	}
}

func TestSetsEqual(t *testing.T) {
	base := Set{Name: "s", Key: []DataType{TypeIPv4Addr, TypeInetProto, TypeInetService}, Data: []DataType{TypeIPv4Addr}, Size: 8}
	with := func(f func(*Set)) *Set {
		s := base
		s.Key, s.Data = slices.Clone(base.Key), slices.Clone(base.Data)
		f(&s)
		return &s
	}
	same := func(*Set) {}
	for _, tc := range []struct {
		name string
		b    *Set
		want bool
	}{
		{"a copy", with(same), true},
		{"the kernel's default size", with(func(s *Set) { s.Size = 0 }), true},
		{"another size", with(func(s *Set) { s.Size = 9 }), false},
		{"another key type", with(func(s *Set) { s.Key[2] = TypeInteger }), false},
		{"a shorter key", with(func(s *Set) { s.Key = s.Key[:2] }), false},
		{"another data type", with(func(s *Set) { s.Data = []DataType{TypeIPv6Addr} }), false},
		{"no data", with(func(s *Set) { s.Data = nil }), false},
		{"a verdict map", with(func(s *Set) { s.Verdict = true }), false},
		{"dynamic", with(func(s *Set) { s.Dynamic = true }), false},
		{"timeouts", with(func(s *Set) { s.Timeout = true }), false},
		{"another name", with(func(s *Set) { s.Name = "t" }), false},
		{"typeof metadata only", with(func(s *Set) { s.KeyExpr = []Operand{F(FieldIPDaddr)} }), true},
	} {
		a := with(same)
		if got := setsEqual(a, tc.b); got != tc.want {
			t.Errorf("%s: setsEqual = %v, want %v", tc.name, got, tc.want)
		}
		if got := setsEqual(tc.b, a); got != tc.want {
			t.Errorf("%s, swapped: setsEqual = %v, want %v", tc.name, got, tc.want)
		}
	}
	empty, none := &Set{Name: "e", Key: []DataType{TypeMark}, Data: []DataType{}}, &Set{Name: "e", Key: []DataType{TypeMark}}
	if !setsEqual(empty, none) {
		t.Error("no data and empty data differ")
	}
	// Every sync compares every set twice: with texts of the types it allocated
	// four strings a set.
	a, b := with(same), with(same)
	if n := testing.AllocsPerRun(100, func() { setsEqual(a, b) }); n != 0 {
		t.Errorf("setsEqual allocates %v times", n)
	}
}

// TestCommittedChainEqualsItselfWithoutHashing: the plan compares the chains
// owners hand back at every render (the shared lb chains) with the view; the
// chain the view recorded from our commit is equal without its rules hashed
// again, while an equal chain under another pointer is compared by its rules.
func TestCommittedChainEqualsItselfWithoutHashing(t *testing.T) {
	c := &Chain{Name: "lb-2-00", Rules: []Rule{{Stmts: []Stmt{DNATMap{Key: []Operand{F(FieldIPDaddr), F(FieldL4Proto), F(FieldThDport), Random(2)}, Map: "endpoints-00"}}}}}
	v := NewView()
	v.Commit(&Tx{NewChains: []*Chain{c}, Chains: []*Chain{c}})
	cv := v.Chains[c.Name]
	if n := testing.AllocsPerRun(20, func() {
		if !cv.equal(c, FamilyIPv4) {
			t.Fatal("the committed chain differs from itself")
		}
	}); n != 0 {
		t.Errorf("comparing the committed chain allocates %v times", n)
	}
	same := &Chain{Name: c.Name, Rules: slices.Clone(c.Rules)}
	other := &Chain{Name: c.Name, Rules: []Rule{{Stmts: []Stmt{Verdict{Kind: Drop}}}}}
	if !cv.equal(same, FamilyIPv4) || cv.equal(other, FamilyIPv4) {
		t.Error("chains under other pointers are not compared by their rules")
	}
}
