package nft

import (
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netnstest"
)

// sampleRuleset uses every statement type, so that the kernel test proves each one's
// text against what nft prints for its netlink encoding.
func sampleRuleset() *Ruleset {
	r := NewRuleset(FamilyIPv4, "sample",
		&Set{Name: "ips", Key: []DataType{TypeIPv4Addr}},
		&Set{Name: "dispatch", Key: []DataType{TypeIPv4Addr, TypeInetProto, TypeInetService}, Verdict: true},
		&Set{Name: "pairs", Key: []DataType{TypeIPv4Addr, TypeIPv4Addr}},
		&Set{Name: "backends", Key: []DataType{TypeIPv4Addr, TypeInetProto, TypeInetService, TypeInteger}, Data: []DataType{TypeIPv4Addr, TypeInetService},
			KeyExpr:  []Operand{F(FieldIPDaddr), F(FieldL4Proto), F(FieldThDport), Random(65536)},
			DataExpr: []Operand{F(FieldIPDaddr), F(FieldThDport)}},
		&Set{Name: "sticky", Key: []DataType{TypeIPv4Addr, TypeIPv4Addr, TypeInetService, TypeIPv4Addr, TypeInetService}, Dynamic: true, Timeout: true, Size: 65536},
		&Set{Name: "affinity", Key: []DataType{TypeIPv4Addr, TypeIPv4Addr, TypeInetProto, TypeInetService}, Data: []DataType{TypeIPv4Addr, TypeInetService},
			Dynamic: true, Timeout: true, Size: 65536,
			KeyExpr:  []Operand{F(FieldIPSaddr), F(FieldIPDaddr), F(FieldL4Proto), F(FieldThDport)},
			DataExpr: []Operand{F(FieldIPDaddr), F(FieldThDport)}},
		&Set{Name: "recording", Key: []DataType{TypeIPv4Addr, TypeInetProto, TypeInetService}, Verdict: true},
		&Set{Name: "nodeports", Key: []DataType{TypeInetProto, TypeInetService, TypeInteger}, Data: []DataType{TypeIPv4Addr, TypeInetService},
			KeyExpr:  []Operand{F(FieldL4Proto), F(FieldThDport), Random(65536)},
			DataExpr: []Operand{F(FieldIPDaddr), F(FieldThDport)}},
	)
	ep := netip.MustParseAddr("10.244.1.2")
	key := []Operand{F(FieldIPSaddr), F(FieldIPDaddr), F(FieldThDport), C(IP(ep)), C(Port(8080))}
	r.SetFragment("base", Fragment{Chains: []*Chain{
		{Name: "nat-prerouting", Hook: &ChainHook{Type: "nat", Hook: "prerouting", Priority: -100}, Rules: []Rule{{Stmts: []Stmt{Verdict{Kind: Jump, Chain: "services"}}}}},
		{Name: "nat-postrouting", Hook: &ChainHook{Type: "nat", Hook: "postrouting", Priority: 100}, Rules: []Rule{
			{Stmts: []Stmt{MarkMatch{Mask: 0x4000, Value: 0x4000}, MarkXor{Bits: 0x4000}, Masquerade{FullyRandom: true}}},
			{Stmts: []Stmt{CtStatusDNAT{}, Lookup{Key: []Operand{F(FieldIPSaddr), F(FieldIPDaddr)}, Set: "pairs"}, Masquerade{}}},
		}},
		{Name: "services", Rules: []Rule{
			{Stmts: []Stmt{MatchPrefix{Field: FieldIPSaddr, Negate: true, Prefix: netip.MustParsePrefix("10.244.0.0/16")}, Lookup{Key: []Operand{F(FieldIPDaddr)}, Set: "ips"}, MarkOr{Bits: 0x4000}}},
			{Stmts: []Stmt{VMap{Key: Fs(FieldIPDaddr, FieldL4Proto, FieldThDport), Map: "dispatch"}}},
			{Stmts: []Stmt{Lookup{Key: []Operand{F(FieldIPDaddr)}, Set: "ips"}, Match{Field: FieldL4Proto, Value: Proto(ProtoICMP)}, Verdict{Kind: Drop}}},
			{Stmts: []Stmt{Lookup{Key: []Operand{F(FieldIPDaddr)}, Set: "ips"}, Reject{}}, Comment: "wrong port"},
		}},
		{Name: "svc-a", Rules: []Rule{
			{Stmts: []Stmt{Lookup{Key: key, Set: "sticky"}, Update{Set: "sticky", Key: key, Timeout: 3 * time.Hour}, DNAT{Addr: ep, Port: 8080}}},
			{Stmts: []Stmt{Numgen{Mod: 2, Value: 0}, Update{Set: "sticky", Key: key, Timeout: 10 * time.Second}, DNAT{Addr: ep, Port: 8080}}},
			{Stmts: []Stmt{DNAT{Addr: netip.MustParseAddr("10.244.2.3"), Port: 80}}},
		}},
		{Name: "svc-b", Rules: []Rule{{Stmts: []Stmt{Reject{TCPReset: true}}}}},
		{Name: "record", Hook: &ChainHook{Type: "filter", Hook: "prerouting", Priority: -99}, Rules: []Rule{{Stmts: []Stmt{CtStateNew{}, CtStatusDNAT{},
			Match{Field: FieldCtProtocol, Value: Proto(ProtoTCP)}, VMap{Key: Fs(FieldCtOrigDaddr, FieldL4Proto, FieldCtOrigProtoDst), Map: "recording"}}}}},
		{Name: "remember", Rules: []Rule{{Stmts: []Stmt{Match{Field: FieldCtProtocol, Value: Proto(ProtoTCP)},
			Update{Set: "affinity", Timeout: time.Minute, Key: []Operand{F(FieldIPSaddr), F(FieldCtOrigDaddr), F(FieldL4Proto), F(FieldCtOrigProtoDst)},
				Data: []Operand{F(FieldIPDaddr), F(FieldCtReplyProtoSrc)}}}}}},
		{Name: "sticky-2", Rules: []Rule{{Stmts: []Stmt{DNATMap{Key: []Operand{F(FieldIPSaddr), F(FieldIPDaddr), F(FieldL4Proto), F(FieldThDport)}, Map: "affinity"}}}}},
		{Name: "lb-2", Rules: []Rule{{Stmts: []Stmt{DNATMap{Key: []Operand{F(FieldIPDaddr), F(FieldL4Proto), F(FieldThDport), Random(2)}, Map: "backends"}}}}},
		{Name: "np-local", Rules: []Rule{
			{Stmts: []Stmt{FibLocal{Saddr: true}, MarkOr{Bits: 0x4000}, DNATMap{Key: []Operand{F(FieldL4Proto), F(FieldThDport), Random(2)}, Map: "nodeports"}}},
			{Stmts: []Stmt{FibLocal{Negate: true}, Verdict{Kind: Drop}}},
			{Stmts: []Stmt{DNATMap{Key: []Operand{F(FieldL4Proto), F(FieldThDport), RandomFrom(1, 65536)}, Map: "nodeports"}}},
		}},
		{Name: "forward", Hook: &ChainHook{Type: "filter", Hook: "forward", Priority: 0}, Rules: []Rule{{Stmts: []Stmt{CtStateInvalid{}, Verdict{Kind: Drop}}}}},
	}, Elements: []Element{
		{Set: "backends", Key: []Datum{IP(netip.MustParseAddr("10.96.0.12")), Proto(ProtoTCP), Port(80), Int(0)}, Data: []Datum{IP(ep), Port(8080)}},
		{Set: "backends", Key: []Datum{IP(netip.MustParseAddr("10.96.0.12")), Proto(ProtoTCP), Port(80), Int(1)}, Data: []Datum{IP(netip.MustParseAddr("10.244.2.3")), Port(8080)}},
		{Set: "dispatch", Key: []Datum{IP(netip.MustParseAddr("10.96.0.12")), Proto(ProtoTCP), Port(80)}, Verdict: &Verdict{Kind: Goto, Chain: "lb-2"}, Comment: "ns/web:http"},
		{Set: "dispatch", Key: []Datum{IP(netip.MustParseAddr("10.96.0.13")), Proto(ProtoTCP), Port(80)}, Verdict: &Verdict{Kind: Drop}},
		{Set: "ips", Key: []Datum{IP(netip.MustParseAddr("10.96.0.10"))}},
		{Set: "ips", Key: []Datum{IP(netip.MustParseAddr("10.96.0.11"))}},
		{Set: "dispatch", Key: []Datum{IP(netip.MustParseAddr("10.96.0.10")), Proto(ProtoTCP), Port(80)}, Verdict: &Verdict{Kind: Goto, Chain: "svc-a"}},
		{Set: "dispatch", Key: []Datum{IP(netip.MustParseAddr("10.96.0.11")), Proto(ProtoUDP), Port(53)}, Verdict: &Verdict{Kind: Goto, Chain: "svc-b"}},
		{Set: "pairs", Key: []Datum{IP(ep), IP(ep)}},
		{Set: "nodeports", Key: []Datum{Proto(ProtoTCP), Port(30080), Int(65536)}, Data: []Datum{IP(ep), Port(8080)}},
		{Set: "recording", Key: []Datum{IP(netip.MustParseAddr("10.96.0.10")), Proto(ProtoTCP), Port(80)}, Verdict: &Verdict{Kind: Goto, Chain: "remember"}},
	}})
	return r
}

func TestKernelListingMatchesText(t *testing.T) {
	ns := netnstest.New(t, "nft")
	k := &Netlink{NetNSFd: ns.Fd}
	r := sampleRuleset()
	want := r.Text()
	tx := PlanFull(r, NewView())
	if err := k.Apply(t.Context(), tx); err != nil {
		t.Fatalf("apply: %v", err)
	}
	got := NormalizeListing(ns.MustRun(t, "nft", "list", "table", "ip", "sample"))
	if got != want {
		t.Fatalf("nft listing differs from Text\n--- nft\n%s\n--- Text\n%s", got, want)
	}

	// Reading back yields a view against which nothing is left to do.
	v, err := k.Read(t.Context(), FamilyIPv4, "sample")
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if tx := PlanFull(r, v); !tx.Empty() {
		t.Fatalf("plan after read-back is not empty: %+v", tx)
	}

	// An incremental change touches only what changed and lands.
	r.SetFragment("base", Fragment{Chains: []*Chain{
		{Name: "svc-a", Rules: []Rule{{Stmts: []Stmt{DNAT{Addr: netip.MustParseAddr("10.244.9.9"), Port: 80}}}}},
	}, Elements: []Element{
		{Set: "ips", Key: []Datum{IP(netip.MustParseAddr("10.96.0.10"))}},
	}})
	tx = Plan(r, v)
	if len(tx.Chains) != 1 || tx.Chains[0].Name != "svc-a" || len(tx.AddSets) != 0 {
		t.Fatalf("incremental plan touches more than svc-a: chains=%d sets=%d", len(tx.Chains), len(tx.AddSets))
	}
	if err := k.Apply(t.Context(), tx); err != nil {
		t.Fatalf("apply incremental: %v", err)
	}
	v.Commit(tx)
	got = NormalizeListing(ns.MustRun(t, "nft", "list", "table", "ip", "sample"))
	if got != r.Text() {
		t.Fatalf("after incremental apply\n--- nft\n%s\n--- Text\n%s", got, r.Text())
	}
	if !strings.Contains(got, "dnat to 10.244.9.9:80") {
		t.Fatalf("incremental change missing from kernel:\n%s", got)
	}
	if err := k.DeleteTable(t.Context(), FamilyIPv4, "sample"); err != nil {
		t.Fatalf("delete table: %v", err)
	}
	if out, _ := ns.Run("nft", "list", "tables"); strings.Contains(out, "sample") {
		t.Fatalf("table still there after DeleteTable: %s", out)
	}
}

func TestKernelRefusedBatchIsReportedAndChangesNothing(t *testing.T) {
	ns := netnstest.New(t, "refuse")
	k := &Netlink{NetNSFd: ns.Fd}
	r := sampleRuleset()
	if err := k.Apply(t.Context(), PlanFull(r, NewView())); err != nil {
		t.Fatal(err)
	}
	before := ns.MustRun(t, "nft", "list", "table", "ip", "sample")
	tests := []struct {
		name string
		tx   *Tx
	}{
		{"a message fails: deleting an element that is not there", &Tx{Family: FamilyIPv4, Table: "sample",
			Chains:      []*Chain{{Name: "svc-b", Rules: []Rule{{Stmts: []Stmt{Reject{}}}}}},
			DelElements: []Element{{Set: "ips", Key: []Datum{IP(netip.MustParseAddr("10.1.2.3"))}}}}},
		{"the commit fails: a jump loop found by validation", &Tx{Family: FamilyIPv4, Table: "sample",
			NewChains: []*Chain{{Name: "loop-a"}, {Name: "loop-b"}},
			Chains: []*Chain{
				{Name: "loop-a", Rules: []Rule{{Stmts: []Stmt{Verdict{Kind: Jump, Chain: "loop-b"}}}}},
				{Name: "loop-b", Rules: []Rule{{Stmts: []Stmt{Verdict{Kind: Jump, Chain: "loop-a"}}}}},
				{Name: "services", Rules: []Rule{{Stmts: []Stmt{Verdict{Kind: Jump, Chain: "loop-a"}}}}},
			}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := k.Apply(t.Context(), tc.tx); err == nil {
				t.Fatal("the kernel's refusal was not reported")
			}
			if after := ns.MustRun(t, "nft", "list", "table", "ip", "sample"); after != before {
				t.Fatalf("a refused batch changed the table:\n%s", after)
			}
		})
	}
}

func TestKernelRecreateReplacesTheTableAtomically(t *testing.T) {
	ns := netnstest.New(t, "recreate")
	k := &Netlink{NetNSFd: ns.Fd}
	if err := k.Apply(t.Context(), PlanFull(sampleRuleset(), NewView())); err != nil {
		t.Fatal(err)
	}
	// The same set name with another key type: the kernel cannot redefine it in place.
	r := NewRuleset(FamilyIPv4, "sample", &Set{Name: "ips", Key: []DataType{TypeIPv4Addr, TypeInetService}})
	r.SetFragment("x", Fragment{Elements: []Element{{Set: "ips", Key: []Datum{IP(netip.MustParseAddr("10.0.0.1")), Port(80)}}}})
	tx := PlanFull(r, NewView())
	tx.Recreate = true
	if err := k.Apply(t.Context(), tx); err != nil {
		t.Fatalf("recreate: %v", err)
	}
	got := NormalizeListing(ns.MustRun(t, "nft", "list", "table", "ip", "sample"))
	if got != r.Text() {
		t.Fatalf("after recreate\n--- kernel\n%s\n--- want\n%s", got, r.Text())
	}
}

// TestKernelConcurrentApplies: the two families' proxies apply at the same time,
// each on its own connection; nothing of a batch may be shared between them (the
// library's set IDs came from a package-level counter without a lock, which the
// race detector reports here when svcproxy leaves them to it).
func TestKernelConcurrentApplies(t *testing.T) {
	var wg sync.WaitGroup
	for _, name := range []string{"conc-a", "conc-b"} {
		ns := netnstest.New(t, name)
		k := &Netlink{NetNSFd: ns.Fd}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if err := k.Apply(t.Context(), PlanFull(sampleRuleset(), NewView())); err != nil {
					t.Errorf("%s: apply: %v", name, err)
					return
				}
				if err := k.DeleteTable(t.Context(), FamilyIPv4, "sample"); err != nil {
					t.Errorf("%s: delete table: %v", name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestKernelCommitReportsItsGeneration: the commit of a transaction reports the
// generation it made (asked by an echo on its first message), which the sync uses
// instead of reading the generation again; a refused transaction reports none,
// and the socket stays usable for what follows.
func TestKernelCommitReportsItsGeneration(t *testing.T) {
	ns := netnstest.New(t, "commitgen")
	k := &Netlink{NetNSFd: ns.Fd}
	if _, ok := k.CommittedGeneration(); ok {
		t.Fatal("a generation reported before any commit")
	}
	r := sampleRuleset()
	v := NewView()
	for i, tx := range []*Tx{PlanFull(r, v), {Family: FamilyIPv4, Table: "sample",
		AddElements: []Element{{Set: "ips", Key: []Datum{IP(netip.MustParseAddr("10.96.0.99"))}}}}} {
		if err := k.Apply(t.Context(), tx); err != nil {
			t.Fatal(err)
		}
		got, ok := k.CommittedGeneration()
		want, err := k.Generation(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !ok || got != want {
			t.Fatalf("transaction %d: committed generation %d (%v), the kernel's is %d", i, got, ok, want)
		}
	}
	ns.MustRun(t, "nft", "add", "table", "ip", "other") // another program's commit
	got, _ := k.CommittedGeneration()
	if now, err := k.Generation(t.Context()); err != nil || now != got+1 {
		t.Fatalf("after a foreign commit the generation is %d (%v), want %d", now, err, got+1)
	}
	refused := &Tx{Family: FamilyIPv4, Table: "sample", DelElements: []Element{{Set: "ips", Key: []Datum{IP(netip.MustParseAddr("10.1.2.3"))}}}}
	if err := k.Apply(t.Context(), refused); err == nil {
		t.Fatal("the kernel's refusal was not reported")
	}
	if gen, ok := k.CommittedGeneration(); ok {
		t.Fatalf("a refused transaction reported generation %d", gen)
	}
	if err := k.Apply(t.Context(), &Tx{Family: FamilyIPv4, Table: "sample",
		AddElements: []Element{{Set: "ips", Key: []Datum{IP(netip.MustParseAddr("10.96.0.98"))}}}}); err != nil {
		t.Fatal(err)
	}
	if got, ok := k.CommittedGeneration(); !ok {
		t.Fatal("no generation reported after a refusal")
	} else if want, _ := k.Generation(t.Context()); got != want {
		t.Fatalf("after a refusal: committed generation %d, the kernel's %d", got, want)
	}
	// A recreation asks for no report (its first message deletes the table,
	// whose echo would be every object's deletion): the generation is read.
	recreate := PlanFull(r, NewView())
	recreate.Recreate = true
	if err := k.Apply(t.Context(), recreate); err != nil {
		t.Fatal(err)
	}
	if gen, ok := k.CommittedGeneration(); ok {
		t.Fatalf("a recreation reported generation %d", gen)
	}
}
