package nft

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// The benchmarks below run svcproxy's hand-written netlink paths and
// google/nftables' on the same table, in a namespace each creates (docs/netlink.md
// has the numbers):
//
//	nice -n 10 go test -count=1 -run '^$' -bench 'KernelApply|KernelRead' -benchmem -benchtime 5x ./pkg/nft/

// benchServices is the number of Services of the benchmark table: each one a
// ClusterIP in a set, a dispatch element that goes to one of 100 chains, and two
// backends in a data map.
const benchServices = 2000

// benchRuleset is a table shaped as svcproxy's: a set, a verdict map, a data
// map read by shared chains, n Services' elements.
func benchRuleset(n int) *Ruleset {
	r := NewRuleset(FamilyIPv4, "bench",
		&Set{Name: "ips", Key: []DataType{TypeIPv4Addr}},
		&Set{Name: "dispatch", Key: []DataType{TypeIPv4Addr, TypeInetProto, TypeInetService}, Verdict: true},
		&Set{Name: "backends", Key: []DataType{TypeIPv4Addr, TypeInetProto, TypeInetService, TypeInteger}, Data: []DataType{TypeIPv4Addr, TypeInetService}},
	)
	const chains = 100
	var cs []*Chain
	cs = append(cs, &Chain{Name: "prerouting", Hook: &ChainHook{Type: "nat", Hook: "prerouting", Priority: -100}, Rules: []Rule{
		{Stmts: []Stmt{Lookup{Key: []Operand{F(FieldIPDaddr)}, Set: "ips"}, MarkOr{Bits: 0x4000}}},
		{Stmts: []Stmt{VMap{Key: Fs(FieldIPDaddr, FieldL4Proto, FieldThDport), Map: "dispatch"}}},
	}})
	for i := range chains {
		cs = append(cs, &Chain{Name: fmt.Sprintf("lb-%d", i), Rules: []Rule{
			{Stmts: []Stmt{DNATMap{Key: []Operand{F(FieldIPDaddr), F(FieldL4Proto), F(FieldThDport), Random(2)}, Map: "backends"}}},
		}})
	}
	var elems []Element
	for i := range n {
		ip := IP(netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}))
		elems = append(elems,
			Element{Set: "ips", Key: []Datum{ip}},
			Element{Set: "dispatch", Key: []Datum{ip, Proto(ProtoTCP), Port(80)}, Verdict: &Verdict{Kind: Goto, Chain: fmt.Sprintf("lb-%d", i%chains)}, Comment: fmt.Sprintf("ns/svc-%d:http", i)},
		)
		for k := range 2 {
			ep := netip.AddrFrom4([4]byte{10, 244, byte(i >> 7), byte(i<<1 | k)})
			elems = append(elems, Element{Set: "backends", Key: []Datum{ip, Proto(ProtoTCP), Port(80), Int(uint32(k))}, Data: []Datum{IP(ep), Port(8080)}})
		}
	}
	r.SetFragment("bench", Fragment{Chains: cs, Elements: elems})
	return r
}

// libraryConn is a lasting google/nftables connection in nsFd (one socket for
// all its calls, as svcproxy keeps one: see Netlink.batch) with svcproxy's
// socket buffers (the library's default ones overrun on a batch this size).
func libraryConn(b *testing.B, nsFd int) *nftables.Conn {
	c, err := nftables.New(nftables.AsLasting(), nftables.WithNetNSFd(nsFd), nftables.WithSockOptions(func(c *netlink.Conn) error { return nlkit.RaiseBuffers(c, socketBuffer) }))
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// libraryApply sends tx as google/nftables sends it: the same objects Apply
// queues, the elements through SetAddElements (elementsPerMessage per call, as
// before elemmsg.go), every message acknowledged and every rule echoed.
func libraryApply(c *nftables.Conn, tx *Tx) error {
	t := &nftables.Table{Family: nftables.TableFamily(tx.Family), Name: tx.Table}
	c.AddTable(t)
	sets, ctx, err := queueSetsAndChains(c, t, tx)
	if err != nil {
		return err
	}
	bySet := map[string][]nftables.SetElement{}
	var order []string
	for _, e := range tx.Added() {
		if _, ok := bySet[e.Set]; !ok {
			order = append(order, e.Set)
		}
		bySet[e.Set] = append(bySet[e.Set], netlinkElement(e))
	}
	for _, ch := range tx.Chains {
		nc := &nftables.Chain{Table: t, Name: ch.Name}
		c.FlushChain(nc)
		for _, r := range ch.Rules {
			c.AddRule(&nftables.Rule{Table: t, Chain: nc, Exprs: ruleExprs(ctx, r), UserData: ruleUserData(r)})
		}
	}
	for _, name := range order {
		all := bySet[name]
		for len(all) > 0 {
			n := min(len(all), elementsPerMessage)
			if err := c.SetAddElements(sets[name], all[:n]); err != nil {
				return err
			}
			all = all[n:]
		}
	}
	return c.Flush()
}

// BenchmarkKernelApply times one cold load of the benchmark table: svcproxy's
// send (Netlink.Apply: elements encoded by elemmsg.go, one buffer, one sendmsg,
// one acknowledgement) against google/nftables' Flush of the same objects.
func BenchmarkKernelApply(b *testing.B) {
	r := benchRuleset(benchServices)
	for _, path := range []string{"svcproxy", "google-nftables"} {
		b.Run(fmt.Sprintf("services=%d/%s", benchServices, path), func(b *testing.B) {
			ns := netnstest.New(b, "apply")
			k := &Netlink{NetNSFd: ns.Fd}
			defer k.Close()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				_ = k.DeleteTable(context.Background(), FamilyIPv4, "bench")
				tx := PlanFull(r, NewView())
				b.StartTimer()
				var err error
				if path == "svcproxy" {
					err = k.Apply(context.Background(), tx)
				} else {
					c := libraryConn(b, ns.Fd)
					err = libraryApply(c, tx)
					_ = c.CloseLasting()
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			checkBenchTable(b, k)
		})
	}
}

// checkBenchTable fails unless the kernel holds the whole benchmark table.
func checkBenchTable(b *testing.B, k *Netlink) {
	b.Helper()
	v, err := k.Read(context.Background(), FamilyIPv4, "bench")
	if err != nil {
		b.Fatal(err)
	}
	if want := 4 * benchServices; len(v.Elements) != want || len(v.Chains) != 101 {
		b.Fatalf("read back %d elements and %d chains, want %d and 101", len(v.Elements), len(v.Chains), want)
	}
}

// BenchmarkKernelRead times one read of the whole benchmark table: svcproxy's
// Read (its dumps decoded by decode.go, every rule's expressions digested)
// against google/nftables' ListTableOfFamily, GetSets, GetSetElements,
// ListChainsOfTableFamily and GetRules, which decode into the library's types.
func BenchmarkKernelRead(b *testing.B) {
	ns := netnstest.New(b, "read")
	k := &Netlink{NetNSFd: ns.Fd}
	defer k.Close()
	if err := k.Apply(context.Background(), PlanFull(benchRuleset(benchServices), NewView())); err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("services=%d/svcproxy", benchServices), func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			checkBenchTable(b, k)
		}
	})
	b.Run(fmt.Sprintf("services=%d/google-nftables", benchServices), func(b *testing.B) {
		c := libraryConn(b, ns.Fd)
		defer c.CloseLasting()
		b.ReportAllocs()
		for range b.N {
			elems, rules, err := libraryRead(c, nftables.TableFamilyIPv4, "bench")
			if err != nil {
				b.Fatal(err)
			}
			if elems != 4*benchServices || rules != 102 {
				b.Fatalf("read %d elements and %d rules", elems, rules)
			}
		}
	})
}

// libraryRead reads a table as svcproxy's Read does, with the library's getters.
func libraryRead(c *nftables.Conn, family nftables.TableFamily, name string) (elems, rules int, err error) {
	t, err := c.ListTableOfFamily(name, family)
	if err != nil {
		return 0, 0, err
	}
	sets, err := c.GetSets(t)
	if err != nil {
		return 0, 0, err
	}
	for _, s := range sets {
		if s.Anonymous || s.Dynamic {
			continue
		}
		es, err := c.GetSetElements(s)
		if err != nil {
			return 0, 0, err
		}
		elems += len(es)
	}
	chains, err := c.ListChainsOfTableFamily(family)
	if err != nil {
		return 0, 0, err
	}
	for _, ch := range chains {
		if ch.Table.Name != name {
			continue
		}
		rs, err := c.GetRules(t, ch)
		if err != nil {
			return 0, 0, err
		}
		rules += len(rs)
	}
	return elems, rules, nil
}
