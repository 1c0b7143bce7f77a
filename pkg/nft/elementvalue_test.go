package nft

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRulesetKeepsElementsExactly: the ruleset keeps elements compactly, and what
// it gives back is what it was given, for every kind of set: concatenated keys,
// data maps, verdict maps with comments, timeouts, and a set it does not declare.
func TestRulesetKeepsElementsExactly(t *testing.T) {
	ip := func(s string) Datum { return IP(netip.MustParseAddr(s)) }
	r := NewRuleset(FamilyIPv4, "t",
		&Set{Name: "ips", Key: []DataType{TypeIPv4Addr}},
		&Set{Name: "eps", Key: []DataType{TypeIPv4Addr, TypeInetProto, TypeInetService, TypeInteger}, Data: []DataType{TypeIPv4Addr, TypeInetService}},
		&Set{Name: "dispatch", Key: []DataType{TypeIPv4Addr, TypeInetProto, TypeInetService}, Verdict: true},
		&Set{Name: "timed", Key: []DataType{TypeIPv4Addr}, Timeout: true},
	)
	in := []Element{
		{Set: "ips", Key: []Datum{ip("10.96.0.10")}},
		{Set: "eps", Key: []Datum{ip("10.96.0.10"), Proto(ProtoTCP), Port(80), Int(1)}, Data: []Datum{ip("10.244.1.3"), Port(8080)}},
		{Set: "dispatch", Key: []Datum{ip("10.96.0.10"), Proto(ProtoUDP), Port(53)}, Verdict: &Verdict{Kind: Goto, Chain: "lb-2-10"}, Comment: "ns/dns:dns/UDP"},
		{Set: "timed", Key: []Datum{ip("10.0.0.1")}, Timeout: time.Minute},
		{Set: "undeclared", Key: []Datum{Port(9)}, Data: []Datum{Mark(7)}},
	}
	r.SetFragment("a", Fragment{Elements: in})
	want := slices.Clone(in)
	slices.SortFunc(want, func(a, b Element) int { return strings.Compare(a.ID(), b.ID()) })
	if diff := cmp.Diff(want, r.Elements(), cmp.AllowUnexported(Datum{})); diff != "" {
		t.Fatalf("elements (-given +kept):\n%s", diff)
	}
}
