package proxy

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// histogramCount is how many observations h holds.
func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var d dto.Metric
	if err := h.(prometheus.Metric).Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetHistogram().GetSampleCount()
}

// foreignApply commits to our table, as another program would, a transaction
// that adds add and deletes del.
func foreignApply(t *testing.T, k *nft.Fake, add, del []nft.Element) {
	t.Helper()
	tx := &nft.Tx{Family: nft.FamilyIPv4, Table: TableName, AddElements: add, DelElements: del}
	if err := k.Apply(t.Context(), tx); err != nil {
		t.Fatal(err)
	}
}

// fakeElements returns the elements of set the fake kernel holds.
func fakeElements(k *nft.Fake, set string) []nft.Element {
	var out []nft.Element
	for _, e := range k.Ruleset(nft.FamilyIPv4, TableName).Elements() {
		if e.Set == set {
			out = append(out, e)
		}
	}
	return out
}

// The repair of parts another program changed, on the fake kernel: the sync
// after the notification (noteForeign) reads back only the named parts
// (counted in svcproxy_kernel_partial_read_duration_seconds, no whole read),
// and writes what differs there, and only there: a change the notification
// did not name stays until a resync reads the whole table.
func TestPartialRepair(t *testing.T) {
	stranger := nft.Element{Set: mapServiceIPs, Key: []nft.Datum{nft.IP(netip.MustParseAddr("10.96.0.99")), nft.Proto(nft.ProtoTCP), nft.Port(80)},
		Verdict: &nft.Verdict{Kind: nft.Drop}}
	for _, tc := range []struct {
		name string
		// change breaks the table behind the proxy's back and returns the parts
		// the kernel's notifications would name (or, for the last case, fewer).
		change func(t *testing.T, k *nft.Fake) nft.Parts
		// repaired: the kernel holds the desired table after the sync; else it
		// differs until a resync.
		repaired bool
		// txs is how many transactions the repair writes.
		txs int
	}{
		{"map flushed", func(t *testing.T, k *nft.Fake) nft.Parts {
			foreignApply(t, k, nil, fakeElements(k, mapServiceIPs))
			return nft.Parts{Sets: map[string]bool{mapServiceIPs: true}}
		}, true, 1},
		{"foreign element added", func(t *testing.T, k *nft.Fake) nft.Parts {
			foreignApply(t, k, []nft.Element{stranger}, nil)
			return nft.Parts{Sets: map[string]bool{mapServiceIPs: true}}
		}, true, 1},
		{"web's chain deleted, with the elements that went to it", func(t *testing.T, k *nft.Fake) nft.Parts {
			name := webChain(t, k)
			k.Tamper(nft.FamilyIPv4, TableName, name)
			return nft.Parts{Chains: map[string]bool{name: true}, Sets: map[string]bool{mapServiceIPs: true}}
		}, true, 1},
		{"table deleted", func(t *testing.T, k *nft.Fake) nft.Parts {
			if err := k.DeleteTable(t.Context(), nft.FamilyIPv4, TableName); err != nil {
				t.Fatal(err)
			}
			// Deleting a table notifies each chain and set in it too.
			return nft.Parts{Table: true, Chains: map[string]bool{chainServices: true}, Sets: map[string]bool{mapServiceIPs: true}}
		}, true, 1},
		{"map flushed, but only a chain named", func(t *testing.T, k *nft.Fake) nft.Parts {
			foreignApply(t, k, nil, fakeElements(k, mapServiceIPs))
			return nft.Parts{Chains: map[string]bool{chainServices: true}}
		}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := nft.NewFake()
			tr := endpoints.NewTracker(endpoints.TrackerOptions{})
			m := NewMetrics(nil)
			p := New(Config{Tracker: tr, Kernel: k, Metrics: m})
			addWeb(tr, "web", "10.96.0.10", "pod1")
			addWeb(tr, "other", "10.96.0.11", "pod2")
			if err := p.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := route(t, k, "10.96.0.10"); got != "dnat 10.244.1.2:80" {
				t.Fatalf("before: %s", got)
			}
			parts := tc.change(t, k)
			if k.Ruleset(nft.FamilyIPv4, TableName).Text() == p.Desired().Text() {
				t.Fatal("the change left the kernel holding the desired table")
			}
			whole, partial, applied := histogramCount(t, m.KernelReadDuration), histogramCount(t, m.KernelPartialReadDuration), k.Applied()
			p.noteForeign(parts)
			if err := p.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := histogramCount(t, m.KernelReadDuration) - whole; got != 0 {
				t.Errorf("%d whole reads, want none", got)
			}
			if got := histogramCount(t, m.KernelPartialReadDuration) - partial; got != 1 {
				t.Errorf("%d partial reads, want 1", got)
			}
			if got := k.Applied() - applied; got != tc.txs {
				t.Errorf("%d transactions, want %d", got, tc.txs)
			}
			got, want := k.Ruleset(nft.FamilyIPv4, TableName).Text(), p.Desired().Text()
			if tc.repaired != (got == want) {
				t.Fatalf("the kernel holds the desired table: %v, want %v:\n%s", got == want, tc.repaired, got)
			}
			if !tc.repaired {
				// What was not named is found by a resync, which reads it all.
				p.RequestResync()
				if err := p.Sync(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if got := route(t, k, "10.96.0.10"); got != "dnat 10.244.1.2:80" {
				t.Fatalf("after the repair: %s", got)
			}
			// Nothing is left to repair: a resync reads and writes nothing.
			p.RequestResync()
			applied = k.Applied()
			if err := p.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := k.Applied() - applied; got != 0 {
				t.Fatalf("a resync after the repair wrote %d transactions", got)
			}
		})
	}
}

// webChain is the name of the chain the web Service's ClusterIP element goes
// to in the fake kernel.
func webChain(t *testing.T, k *nft.Fake) string {
	t.Helper()
	for _, e := range fakeElements(k, mapServiceIPs) {
		if strings.HasPrefix(e.Comment, "ns/web:") && e.Verdict != nil {
			return e.Verdict.Chain
		}
	}
	t.Fatal("no ClusterIP element of the web Service")
	return ""
}
