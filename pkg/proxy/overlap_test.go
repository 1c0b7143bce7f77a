package proxy

import (
	"context"
	"testing"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// overlapServices is more than two transactions' worth of Services
// (maxOwnersPerTx), so that a missing table is written in three, overlapped.
const overlapServices = 2*maxOwnersPerTx + 500

func overlapProxy(t *testing.T, k nft.Kernel) *Proxy {
	t.Helper()
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	for i := 256; i < 256+overlapServices; i++ {
		tr.OnServiceAdd(scaleService(i, true))
		tr.OnEndpointSliceAdd(scaleSlice(i, 0))
	}
	addWeb(tr, "web", "10.96.0.10", "pod1")
	return New(Config{Tracker: tr, Kernel: k, Metrics: NewMetrics(nil)})
}

// holdsDesired fails unless the fake kernel holds exactly p's desired table.
func holdsDesired(t *testing.T, k *nft.Fake, p *Proxy) {
	t.Helper()
	if got, want := k.Ruleset(nft.FamilyIPv4, TableName).Text(), p.Desired().Text(); got != want {
		t.Fatalf("the kernel holds %d bytes of table, the desired table is %d", len(got), len(want))
	}
}

// A table the kernel does not hold (the first sync, or another program deleted
// it) is written in transactions of maxOwnersPerTx Services, each planned while
// the one before is committed: the kernel ends up holding the desired table,
// and the next plan, against the view recorded as they were sent, finds
// nothing to do.
func TestMissingTableWrittenOverlapped(t *testing.T) {
	k := nft.NewFake()
	p := overlapProxy(t, k)
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := k.Applied(), 3; got != want {
		t.Fatalf("%d transactions, want %d", got, want)
	}
	holdsDesired(t, k, p)
	p.desired.MarkAllDirty(p.view)
	if tx := nft.Plan(p.desired, p.view); !tx.Empty() {
		t.Fatalf("the view differs from what was sent: a full plan after the write changes %d objects", tx.Size())
	}

	// Deleted by another program, as its notifications tell: the view is
	// emptied in place, and the table written again the same way.
	if err := k.DeleteTable(t.Context(), nft.FamilyIPv4, TableName); err != nil {
		t.Fatal(err)
	}
	p.noteForeign(nft.Parts{Table: true})
	applied := k.Applied()
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	holdsDesired(t, k, p)
	if got, want := k.Applied()-applied, 3; got != want {
		t.Fatalf("%d transactions, want %d", got, want)
	}
}

// When the kernel refuses one of the overlapped transactions, the view (which
// recorded it as sent) is dropped and the sync fails; the next one reads the
// table back and writes the rest one transaction after the other, retrying the
// refused transaction's Services one by one: only the bad Service is left out.
func TestOverlappedWriteRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  int // the scale Service whose elements the kernel refuses
	}{
		{"first transaction", 300},         // the one that creates the table
		{"middle transaction", 256 + 1500}, // the view recorded the first as sent, and the third was planned
		{"last transaction", 256 + 2400},   // nothing planned after it
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := nft.NewFake()
			p := overlapProxy(t, k)
			bad := "bench/" + scaleService(tc.bad, true).Name
			refusing := refuseService(k, bad)
			if err := p.Sync(t.Context()); err == nil {
				t.Fatal("the sync that wrote a refused transaction succeeded")
			}
			if p.view != nil || !p.overlapFailed {
				t.Fatalf("after the refusal: view dropped %v, overlap off %v; want both", p.view == nil, p.overlapFailed)
			}
			// Refused again, alone: every other Service is programmed.
			_ = p.Sync(t.Context())
			if got := p.refused.list(); len(got) != 1 || got[0].Service != bad {
				t.Fatalf("refused %v, want only %s", got, bad)
			}
			*refusing = false
			if err := p.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			holdsDesired(t, k, p)
			if p.overlapFailed {
				t.Fatal("a sync succeeded and the overlap is still off")
			}
			if got := p.refused.list(); len(got) != 0 {
				t.Fatalf("still refused: %v", got)
			}
		})
	}
}
