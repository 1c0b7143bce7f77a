package proxy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

func TestAnchorRuleset(t *testing.T) {
	want := `table ip svcproxy-anchor {
	chain conntrack {
		ct state new comment "never jumped to: its ct expression keeps conntrack on"
	}

	chain nat-output {
		type nat hook output priority -100; policy accept;
	}

	chain nat-postrouting {
		type nat hook postrouting priority srcnat; policy accept;
	}

	chain nat-prerouting {
		type nat hook prerouting priority dstnat; policy accept;
	}
}
`
	if got := AnchorRuleset(nft.FamilyIPv4).Text(); got != want {
		t.Fatalf("anchor table:\n%s\nwant:\n%s", got, want)
	}
	// The same nat hooks and priorities as our table's nat chains.
	main := NewRuleset(Options{})
	for name, c := range AnchorRuleset(nft.FamilyIPv4).Chains {
		if c.Hook == nil {
			continue
		}
		if m, ok := main.Chains[name]; !ok || m.Hook == nil || *m.Hook != *c.Hook {
			t.Errorf("anchor chain %s hooks %+v, our table's %+v", name, *c.Hook, m)
		}
	}
	if got := AnchorRuleset(nft.FamilyIPv6).Text(); !strings.HasPrefix(got, "table ip6 svcproxy-anchor {") {
		t.Errorf("IPv6 anchor table:\n%s", got)
	}
}

func TestAnchorTx(t *testing.T) {
	r := AnchorRuleset(nft.FamilyIPv4)
	k := nft.NewFake()
	read := func() *nft.View {
		t.Helper()
		v, err := k.Read(t.Context(), nft.FamilyIPv4, AnchorTableName)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	apply := func(tx *nft.Tx) {
		t.Helper()
		if err := k.Apply(t.Context(), tx); err != nil {
			t.Fatal(err)
		}
	}
	holds := func(what string) {
		t.Helper()
		if got, want := k.Ruleset(nft.FamilyIPv4, AnchorTableName).Text(), r.Text(); got != want {
			t.Fatalf("%s: the kernel holds\n%s", what, got)
		}
		if tx := anchorTx(r, read()); !tx.Empty() {
			t.Fatalf("%s: the anchor in place, the plan still changes %d objects", what, tx.Size())
		}
	}

	tx := anchorTx(r, read())
	if tx.Recreate || len(tx.NewChains) != 4 {
		t.Fatalf("missing table: recreate %v, %d new chains, want 4 created", tx.Recreate, len(tx.NewChains))
	}
	apply(tx)
	holds("created")

	// Another program's chain in our anchor table goes; its rule in our chain too.
	apply(&nft.Tx{Family: nft.FamilyIPv4, Table: AnchorTableName, NewChains: []*nft.Chain{{Name: "intruder"}}, Chains: []*nft.Chain{{Name: "intruder"}}})
	apply(&nft.Tx{Family: nft.FamilyIPv4, Table: AnchorTableName, Chains: []*nft.Chain{{Name: chainPrerouting,
		Hook: r.Chains[chainPrerouting].Hook, Rules: []nft.Rule{{Stmts: []nft.Stmt{nft.Verdict{Kind: nft.Drop}}}}}}})
	tx = anchorTx(r, read())
	if tx.Recreate || len(tx.DelChains) != 1 || len(tx.Chains) != 1 {
		t.Fatalf("foreign chain and rule: recreate %v, deletes %v, rewrites %d chains", tx.Recreate, tx.DelChains, len(tx.Chains))
	}
	apply(tx)
	holds("repaired in place")

	// A chain redefined at another hook cannot be changed in place.
	if err := k.DeleteTable(t.Context(), nft.FamilyIPv4, AnchorTableName); err != nil {
		t.Fatal(err)
	}
	apply(&nft.Tx{Family: nft.FamilyIPv4, Table: AnchorTableName, NewChains: []*nft.Chain{{Name: chainOutput,
		Hook: &nft.ChainHook{Type: "filter", Hook: "output", Priority: 0}}}, Chains: []*nft.Chain{{Name: chainOutput,
		Hook: &nft.ChainHook{Type: "filter", Hook: "output", Priority: 0}}}})
	if tx = anchorTx(r, read()); !tx.Recreate {
		t.Fatal("a redefined chain: the plan does not recreate the table")
	}
	apply(tx)
	holds("recreated")
}

// TestSyncKeepsTheAnchor: the first sync writes the anchor table before ours; later
// syncs read it only when a check is due (a resync after another program's commit,
// or its notification), repair it then, and a refused anchor fails no sync.
func TestSyncKeepsTheAnchor(t *testing.T) {
	k, tr, clk, p := readCountingProxy()
	want := AnchorRuleset(nft.FamilyIPv4).Text()
	anchor := func() string { return k.Ruleset(nft.FamilyIPv4, AnchorTableName).Text() }
	step := func(name string, before func(), wantReads int) {
		t.Helper()
		clk.Step(time.Hour) // past any drift-check deferral
		before()
		if err := p.Sync(t.Context()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if k.anchorReads != wantReads {
			t.Fatalf("%s: %d reads of the anchor table, want %d", name, k.anchorReads, wantReads)
		}
		if got := anchor(); got != want {
			t.Fatalf("%s: the anchor table is\n%s", name, got)
		}
		if got := route(t, k.Fake, "10.96.0.10"); got != "dnat 10.244.1.2:80" && got != "dnat 10.244.1.3:80" {
			t.Fatalf("%s: our table routes the Service to %s", name, got)
		}
	}
	step("first sync", func() {}, 1)
	step("a change", func() { tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod2"))) }, 1)
	step("resync after only our own commits", p.RequestResync, 1)
	step("resync after another program's commit", func() { k.ForeignCommit(); p.RequestResync() }, 2)
	step("the anchor deleted, as its notification says", func() {
		if err := k.DeleteTable(t.Context(), nft.FamilyIPv4, AnchorTableName); err != nil {
			t.Fatal(err)
		}
		p.noteAnchor()
	}, 3)

	// Refused: the sync still programs our table, and each sync tries again.
	refuse := true
	k.Refuse = func(tx *nft.Tx) error {
		if refuse && tx.Table == AnchorTableName {
			return errors.New("fake: operation not permitted")
		}
		return nil
	}
	if err := k.DeleteTable(t.Context(), nft.FamilyIPv4, AnchorTableName); err != nil {
		t.Fatal(err)
	}
	p.noteAnchor()
	tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod1")))
	if err := p.Sync(t.Context()); err != nil {
		t.Fatalf("a refused anchor failed the sync: %v", err)
	}
	if got := route(t, k.Fake, "10.96.0.10"); got != "dnat 10.244.1.2:80" {
		t.Fatalf("with the anchor refused, our table routes the Service to %s", got)
	}
	if got := anchor(); strings.Contains(got, "chain") {
		t.Fatalf("a refused anchor in the kernel:\n%s", got)
	}
	refuse = false
	step("the sync after a refusal", func() {}, 5)
	step("and none after it succeeded", func() {}, 5)
}

// TestSyncKeepsTheIPv6Anchor: an IPv6 proxy writes the ip6 anchor table.
func TestSyncKeepsTheIPv6Anchor(t *testing.T) {
	k := nft.NewFake()
	tr := endpoints.NewTracker(endpoints.TrackerOptions{Family: endpoints.IPv6})
	p := New(Config{Tracker: tr, Kernel: k, Options: Options{Family: endpoints.IPv6}})
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := k.Ruleset(nft.FamilyIPv6, AnchorTableName).Text(), AnchorRuleset(nft.FamilyIPv6).Text(); got != want {
		t.Fatalf("ip6 anchor table:\n%s\nwant:\n%s", got, want)
	}
}
