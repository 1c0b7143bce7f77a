package nft

import (
	"net/netip"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netnstest"
)

// sampleRuleset6 is sampleRuleset's IPv6 twin: every statement and set form svcproxy
// uses in its ip6 table, with 16-byte addresses in keys, data and concatenations.
func sampleRuleset6() *Ruleset {
	a := netip.MustParseAddr
	addrKey := []DataType{TypeIPv6Addr, TypeInetProto, TypeInetService}
	r := NewRuleset(FamilyIPv6, "sample",
		&Set{Name: "ips", Key: []DataType{TypeIPv6Addr}},
		&Set{Name: "dispatch", Key: addrKey, Verdict: true},
		&Set{Name: "pairs", Key: []DataType{TypeIPv6Addr, TypeIPv6Addr}},
		&Set{Name: "backends", Key: []DataType{TypeIPv6Addr, TypeInetProto, TypeInetService, TypeInteger}, Data: []DataType{TypeIPv6Addr, TypeInetService},
			KeyExpr:  []Operand{F(FieldIP6Daddr), F(FieldL4Proto), F(FieldThDport), Random(65536)},
			DataExpr: []Operand{F(FieldIP6Daddr), F(FieldThDport)}},
		&Set{Name: "affinity", Key: []DataType{TypeIPv6Addr, TypeIPv6Addr, TypeInetProto, TypeInetService}, Data: []DataType{TypeIPv6Addr, TypeInetService},
			Dynamic: true, Timeout: true, Size: 65536,
			KeyExpr:  []Operand{F(FieldIP6Saddr), F(FieldIP6Daddr), F(FieldL4Proto), F(FieldThDport)},
			DataExpr: []Operand{F(FieldIP6Daddr), F(FieldThDport)}},
		&Set{Name: "recording", Key: addrKey, Verdict: true},
		&Set{Name: "nodeports", Key: []DataType{TypeInetProto, TypeInetService, TypeInteger}, Data: []DataType{TypeIPv6Addr, TypeInetService},
			KeyExpr:  []Operand{F(FieldL4Proto), F(FieldThDport), Random(65536)},
			DataExpr: []Operand{F(FieldIP6Daddr), F(FieldThDport)}},
	)
	ep := a("fd00:10:244:1::2")
	r.SetFragment("base", Fragment{Chains: []*Chain{
		{Name: "nat-prerouting", Hook: &ChainHook{Type: "nat", Hook: "prerouting", Priority: -100}, Rules: []Rule{{Stmts: []Stmt{Verdict{Kind: Jump, Chain: "services"}}}}},
		{Name: "nat-postrouting", Hook: &ChainHook{Type: "nat", Hook: "postrouting", Priority: 100}, Rules: []Rule{
			{Stmts: []Stmt{MarkMatch{Mask: 0x4000, Value: 0x4000}, MarkXor{Bits: 0x4000}, Masquerade{FullyRandom: true}}},
			{Stmts: []Stmt{CtStatusDNAT{}, Lookup{Key: []Operand{F(FieldIP6Saddr), F(FieldIP6Daddr)}, Set: "pairs"}, Masquerade{}}},
		}},
		{Name: "services", Rules: []Rule{
			{Stmts: []Stmt{MatchPrefix{Field: FieldIP6Saddr, Negate: true, Prefix: netip.MustParsePrefix("fd00:10:244::/56")}, Lookup{Key: []Operand{F(FieldIP6Daddr)}, Set: "ips"}, MarkOr{Bits: 0x4000}}},
			{Stmts: []Stmt{VMap{Key: Fs(FieldIP6Daddr, FieldL4Proto, FieldThDport), Map: "dispatch"}}},
			{Stmts: []Stmt{Lookup{Key: []Operand{F(FieldIP6Daddr)}, Set: "ips"}, Match{Field: FieldL4Proto, Value: Proto(ProtoICMPv6)}, Verdict{Kind: Drop}}},
			{Stmts: []Stmt{Lookup{Key: []Operand{F(FieldIP6Daddr)}, Set: "ips"}, Reject{}}, Comment: "wrong port"},
		}},
		{Name: "svc-a", Rules: []Rule{
			{Stmts: []Stmt{MatchPrefix{Field: FieldIP6Saddr, Prefix: netip.MustParsePrefix("fd00:1::/64")}, DNAT{Addr: ep, Port: 8080}}},
			{Stmts: []Stmt{Match{Field: FieldIP6Daddr, Negate: true, Value: IP(a("::1"))}, Verdict{Kind: Return}}},
		}},
		{Name: "svc-b", Rules: []Rule{{Stmts: []Stmt{Reject{TCPReset: true}}}}},
		{Name: "record", Hook: &ChainHook{Type: "filter", Hook: "prerouting", Priority: -99}, Rules: []Rule{{Stmts: []Stmt{CtStateNew{}, CtStatusDNAT{},
			Match{Field: FieldCtProtocol, Value: Proto(ProtoTCP)}, VMap{Key: Fs(FieldCtOrigDaddr6, FieldL4Proto, FieldCtOrigProtoDst), Map: "recording"}}}}},
		{Name: "remember", Rules: []Rule{{Stmts: []Stmt{Match{Field: FieldCtProtocol, Value: Proto(ProtoTCP)},
			Update{Set: "affinity", Timeout: time.Minute, Key: []Operand{F(FieldIP6Saddr), F(FieldCtOrigDaddr6), F(FieldL4Proto), F(FieldCtOrigProtoDst)},
				Data: []Operand{F(FieldIP6Daddr), F(FieldCtReplyProtoSrc)}}}}}},
		{Name: "sticky-2", Rules: []Rule{{Stmts: []Stmt{DNATMap{Family: FamilyIPv6, Key: []Operand{F(FieldIP6Saddr), F(FieldIP6Daddr), F(FieldL4Proto), F(FieldThDport)}, Map: "affinity"}}}}},
		{Name: "lb-2", Rules: []Rule{{Stmts: []Stmt{DNATMap{Family: FamilyIPv6, Key: []Operand{F(FieldIP6Daddr), F(FieldL4Proto), F(FieldThDport), Random(2)}, Map: "backends"}}}}},
		{Name: "np-local", Rules: []Rule{
			{Stmts: []Stmt{FibLocal{Saddr: true}, MarkOr{Bits: 0x4000}, DNATMap{Family: FamilyIPv6, Key: []Operand{F(FieldL4Proto), F(FieldThDport), Random(2)}, Map: "nodeports"}}},
			{Stmts: []Stmt{FibLocal{Negate: true}, Verdict{Kind: Drop}}},
			{Stmts: []Stmt{DNATMap{Family: FamilyIPv6, Key: []Operand{F(FieldL4Proto), F(FieldThDport), RandomFrom(1, 65536)}, Map: "nodeports"}}},
		}},
		{Name: "forward", Hook: &ChainHook{Type: "filter", Hook: "forward", Priority: 0}, Rules: []Rule{{Stmts: []Stmt{CtStateInvalid{}, Verdict{Kind: Drop}}}}},
	}, Elements: []Element{
		{Set: "backends", Key: []Datum{IP(a("fd00:10:96::12")), Proto(ProtoTCP), Port(80), Int(0)}, Data: []Datum{IP(ep), Port(8080)}},
		{Set: "backends", Key: []Datum{IP(a("fd00:10:96::12")), Proto(ProtoTCP), Port(80), Int(1)}, Data: []Datum{IP(a("fd00:10:244:2::3")), Port(8080)}},
		{Set: "dispatch", Key: []Datum{IP(a("fd00:10:96::12")), Proto(ProtoTCP), Port(80)}, Verdict: &Verdict{Kind: Goto, Chain: "lb-2"}, Comment: "ns/web:http"},
		{Set: "dispatch", Key: []Datum{IP(a("fd00:10:96::13")), Proto(ProtoTCP), Port(80)}, Verdict: &Verdict{Kind: Drop}},
		{Set: "dispatch", Key: []Datum{IP(a("fd00:10:96::11")), Proto(ProtoUDP), Port(53)}, Verdict: &Verdict{Kind: Goto, Chain: "svc-b"}},
		{Set: "ips", Key: []Datum{IP(a("fd00:10:96::10"))}},
		{Set: "pairs", Key: []Datum{IP(ep), IP(ep)}},
		{Set: "nodeports", Key: []Datum{Proto(ProtoTCP), Port(30080), Int(65536)}, Data: []Datum{IP(ep), Port(8080)}},
		{Set: "recording", Key: []Datum{IP(a("fd00:10:96::12")), Proto(ProtoTCP), Port(80)}, Verdict: &Verdict{Kind: Goto, Chain: "remember"}},
	}})
	return r
}

// TestKernelIP6ListingMatchesText proves each statement's IPv6 text against what
// nft prints for its netlink encoding in an ip6 table, and that the table reads back
// into a view with nothing left to do.
func TestKernelIP6ListingMatchesText(t *testing.T) {
	ns := netnstest.New(t, "nft6")
	k := &Netlink{NetNSFd: ns.Fd}
	r := sampleRuleset6()
	want := r.Text()
	if err := k.Apply(t.Context(), PlanFull(r, NewView())); err != nil {
		t.Fatalf("apply: %v", err)
	}
	got := NormalizeListing(ns.MustRun(t, "nft", "list", "table", "ip6", "sample"))
	if got != want {
		t.Fatalf("nft listing differs from Text\n--- nft\n%s\n--- Text\n%s", got, want)
	}
	v, err := k.Read(t.Context(), FamilyIPv6, "sample")
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if tx := PlanFull(r, v); !tx.Empty() {
		t.Fatalf("plan after read-back is not empty: %+v", tx)
	}
}
