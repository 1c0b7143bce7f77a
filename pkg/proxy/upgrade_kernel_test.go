package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// oldStickyLayout is the table an svcproxy before the affinity map wrote for one
// sticky port (10.96.0.11:80/TCP on pod1 and pod2): a set affinity keyed client .
// ClusterIP . port . endpoint . endpoint port, and a chain of the port's own with
// per-endpoint rules.
func oldStickyLayout(o Options) *nft.Ruleset {
	sets := []*nft.Set{{Name: mapAffinity, Dynamic: true, Timeout: true, Size: affinitySetSize,
		Key: []nft.DataType{nft.TypeIPv4Addr, nft.TypeIPv4Addr, nft.TypeInetService, nft.TypeIPv4Addr, nft.TypeInetService}}}
	for _, s := range Sets(endpoints.IPv4) {
		if s.Name != mapStickyPorts && !strings.HasPrefix(s.Name, mapAffinity+"-") {
			sets = append(sets, s)
		}
	}
	r := nft.NewRuleset(nft.FamilyIPv4, TableName, sets...)
	skel := Skeleton(o)
	skel.Chains = slices.DeleteFunc(skel.Chains, func(c *nft.Chain) bool {
		return c.Name == chainStickyPrerouting || c.Name == chainStickyOutput
	})
	// Every hairpin shard existed, each with its rule in postrouting.
	for _, c := range skel.Chains {
		if c.Name == chainPostrouting {
			rules := c.Rules[:1:1]
			for k := 0; k < shards; k++ {
				rules = append(rules, nft.Rule{Stmts: []nft.Stmt{nft.CtStatusDNAT{},
					nft.Lookup{Key: []nft.Operand{nft.F(nft.FieldIPSaddr), nft.F(nft.FieldIPDaddr)}, Set: fmt.Sprintf("%s-%02d", setHairpin, k)},
					nft.Masquerade{FullyRandom: true}}})
			}
			c.Rules = rules
		}
	}
	r.SetFragment("skeleton", skel)
	cip := netip.MustParseAddr("10.96.0.11")
	eps := []netip.Addr{netip.MustParseAddr(podIPs["pod1"]), netip.MustParseAddr(podIPs["pod2"])}
	key := func(ep netip.Addr) []nft.Operand {
		return []nft.Operand{nft.F(nft.FieldIPSaddr), nft.F(nft.FieldIPDaddr), nft.F(nft.FieldThDport), nft.C(nft.IP(ep)), nft.C(nft.Port(80))}
	}
	var rules []nft.Rule
	for _, ep := range eps {
		rules = append(rules, nft.Rule{Stmts: []nft.Stmt{nft.Lookup{Key: key(ep), Set: mapAffinity},
			nft.Update{Set: mapAffinity, Key: key(ep), Timeout: time.Minute}, nft.DNAT{Addr: ep, Port: 80}}})
	}
	for k, ep := range eps {
		var stmts []nft.Stmt
		if k == 0 {
			stmts = append(stmts, nft.Numgen{Mod: 2, Value: 0})
		}
		rules = append(rules, nft.Rule{Stmts: append(stmts, nft.Update{Set: mapAffinity, Key: key(ep), Timeout: time.Minute}, nft.DNAT{Addr: ep, Port: 80})})
	}
	const chain = "svc-ns/sticky/tcp/http"
	r.SetFragment("svc:ns/sticky", nft.Fragment{Chains: []*nft.Chain{{Name: chain, Rules: rules}}, Elements: []nft.Element{
		{Set: mapServiceIPs, Key: []nft.Datum{nft.IP(cip), nft.Proto(nft.ProtoTCP), nft.Port(80)}, Verdict: &nft.Verdict{Kind: nft.Goto, Chain: chain}},
		{Set: setClusterIPs, Key: []nft.Datum{nft.IP(cip)}},
	}})
	return r
}

// A table written by the old layout is converted in one transaction (in place: the
// affinity maps have new names, so the old set and chain are deleted in the
// transaction that adds the new ones), after which the Service is sticky and the
// kernel equals render.
func TestKernelUpgradeFromPerPortAffinityChains(t *testing.T) {
	e := newKenv(t)
	old := oldStickyLayout(e.p.cfg.Options)
	if err := e.kernel.Apply(t.Context(), nft.PlanFull(old, nft.NewView())); err != nil {
		t.Fatalf("writing the old layout: %v", err)
	}
	if got := e.who(t, "10.96.0.11:80", 5); len(got) != 1 {
		t.Fatalf("the old layout is not sticky: %v", got)
	}
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	tr.OnServiceAdd(testService("sticky", "10.96.0.11", true, httpPort))
	tr.OnEndpointSliceAdd(testSlice("sticky", readyEP("pod1"), readyEP("pod2")))
	rec := &recordingKernel{Kernel: e.kernel}
	p := New(Config{Tracker: tr, Kernel: rec, Options: e.p.cfg.Options})
	if err := p.Sync(t.Context()); err != nil {
		t.Fatalf("sync on the old layout: %v", err)
	}
	var txs []*nft.Tx
	for _, tx := range rec.txs {
		// The old layout's svcproxy had no anchor table: writing it is not the upgrade.
		if !tx.Empty() && tx.Table == TableName {
			txs = append(txs, tx)
		}
	}
	if len(txs) != 1 {
		t.Fatalf("the upgrade took %d transactions, want one", len(txs))
	}
	if !slices.Contains(txs[0].DelSets, mapAffinity) || !slices.Contains(txs[0].DelChains, "svc-ns/sticky/tcp/http") {
		t.Fatalf("the upgrade deletes sets %v and chains %v, want the old affinity set and chain among them", txs[0].DelSets, txs[0].DelChains)
	}
	got := nft.NormalizeListing(e.w.Node.MustRun(t, "nft", "list", "table", "ip", TableName))
	if want := p.Desired().Text(); got != want {
		t.Fatalf("after the upgrade the kernel differs from render\n--- kernel\n%s\n--- render\n%s", got, want)
	}
	if got := e.who(t, "10.96.0.11:80", 10); len(got) != 1 {
		t.Fatalf("after the upgrade the Service is not sticky: %v", got)
	}
}
