package proxy

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// deleteTable deletes p's table behind its back, as another program would, and
// tells p as the notifications would.
func deleteTable(t *testing.T, k *nft.Fake, p *Proxy) {
	t.Helper()
	if err := k.DeleteTable(t.Context(), nft.FamilyIPv4, TableName); err != nil {
		t.Fatal(err)
	}
	p.noteForeign(nft.Parts{Table: true})
}

// A table another program deleted is written again in transactions of
// maxOwnersPerTx Services, each planned while the one before is committed: the
// kernel ends up holding the desired table, and the next plan, against the view
// recorded as they were sent, finds nothing to do.
func TestMissingTableWrittenOverlapped(t *testing.T) {
	k := nft.NewFake()
	p := overlapProxy(t, k)
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := k.Applied(), 1+3+1; got != want {
		t.Fatalf("%d transactions, want %d (the anchor table's, then the Services' and the hairpin chains')", got, want)
	}
	holdsDesired(t, k, p)

	deleteTable(t, k, p) // the view is emptied in place
	applied := k.Applied()
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	holdsDesired(t, k, p)
	if got, want := k.Applied()-applied, 3; got != want {
		t.Fatalf("%d transactions, want %d", got, want)
	}
	p.desired.MarkAllDirty(p.view)
	if tx := nft.Plan(p.desired, p.view); !tx.Empty() {
		t.Fatalf("the view differs from what was sent: a full plan after the write changes %d objects", tx.Size())
	}
}

// When the kernel refuses one of the overlapped transactions, the view (which
// recorded it as sent) is dropped and the sync fails; the next one reads the
// table back and writes the rest one transaction after the other, retrying the
// refused transaction's Services one by one: only the bad Service is left out.
// The first sync, which finds no table either, is overlapped too.
func TestOverlappedWriteRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bad   int  // the scale Service whose elements the kernel refuses
		first bool // in the proxy's first sync, not a repair
	}{
		{"first transaction", 300, false},         // the one that creates the table
		{"middle transaction", 256 + 1500, false}, // the view recorded the first as sent, and the third was planned
		{"last transaction", 256 + 2400, false},   // nothing planned after it
		{"first sync", 256 + 1500, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := nft.NewFake()
			p := overlapProxy(t, k)
			if !tc.first {
				if err := p.Sync(t.Context()); err != nil {
					t.Fatal(err)
				}
				deleteTable(t, k, p)
			}
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

// The first sync, finding no table, writes each lot of Services while it renders
// the next (renderWriting): its transactions are planned before every Service is
// rendered, so what depends on all of them (the hairpin chains, refreshOnDemand)
// comes in a transaction of its own, after the Services'. Rendering everything
// first would put the hairpin owner, which sorts first, in the first one.
func TestFirstSyncRendersWhileWriting(t *testing.T) {
	k := nft.NewFake()
	var owners [][]string
	k.Refuse = func(tx *nft.Tx) error {
		if tx.Table == TableName {
			owners = append(owners, tx.Owners())
		}
		return nil
	}
	p := overlapProxy(t, k)
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	holdsDesired(t, k, p)
	if len(owners) != 4 {
		t.Fatalf("%d transactions, want 4: three lots of Services, then the hairpin chains", len(owners))
	}
	for i, o := range owners[:3] {
		if slices.Contains(o, hairpinOwner) {
			t.Errorf("transaction %d of the Services carries the hairpin chains: planned after every Service was rendered", i)
		}
	}
	if last := owners[3]; !slices.Equal(last, []string{hairpinOwner}) {
		t.Errorf("the last transaction carries %v, want only %s", last, hairpinOwner)
	}
}

// A first sync that finds the ledger held by its sibling (the other family's
// proxy, writing its own first sync) does not wait for it to render: it renders
// everything beside it and writes after, the hairpin chains then in the first
// transaction, with the first lot of Services.
func TestFirstSyncRendersBesideItsSibling(t *testing.T) {
	k := nft.NewFake()
	var mu sync.Mutex
	var owners [][]string
	k.Refuse = func(tx *nft.Tx) error {
		if tx.Table == TableName {
			mu.Lock()
			owners = append(owners, tx.Owners())
			mu.Unlock()
		}
		return nil
	}
	p := overlapProxy(t, k)
	p.cfg.Ledger = &CommitLedger{}
	p.cfg.Ledger.lock() // the sibling's window
	done := make(chan error, 1)
	go func() { done <- p.Sync(t.Context()) }()
	// Time to reach the window (a few ms: TakeChanges); the rendering, if it
	// does not wait, goes on meanwhile.
	time.Sleep(200 * time.Millisecond)
	p.cfg.Ledger.unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	holdsDesired(t, k, p)
	mu.Lock()
	defer mu.Unlock()
	if len(owners) == 0 || !slices.Contains(owners[0], hairpinOwner) {
		t.Fatalf("the first transaction does not carry the hairpin chains: the sync waited for the ledger to render (renderWriting); %d transactions", len(owners))
	}
}

// pausingKernel is a fake kernel whose notifications can be paused
// (notificationPauser); it counts the transactions applied while paused (the
// overlapped ones from another goroutine).
type pausingKernel struct {
	*nft.Fake
	paused, pausedApplies, liveApplies atomic.Int32
}

func (k *pausingKernel) PauseNotifications() func() {
	k.paused.Add(1)
	return func() { k.paused.Add(-1) }
}

func (k *pausingKernel) Apply(ctx context.Context, tx *nft.Tx) error {
	if k.paused.Load() > 0 {
		k.pausedApplies.Add(1)
	} else {
		k.liveApplies.Add(1)
	}
	return k.Fake.Apply(ctx, tx)
}

// A big sync is written with the kernel's notifications paused (each element
// written costs the kernel a notification while anyone listens); a small one is
// not, so that another program's change meanwhile is still named.
func TestBigSyncPausesNotifications(t *testing.T) {
	k := &pausingKernel{Fake: nft.NewFake()}
	p := overlapProxy(t, k)
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if k.paused.Load() != 0 || k.liveApplies.Load() != 0 || int(k.pausedApplies.Load()) != k.Applied() {
		t.Fatalf("cold sync: %d transactions paused, %d not, paused %d times after it, want all of %d paused and resumed",
			k.pausedApplies.Load(), k.liveApplies.Load(), k.paused.Load(), k.Applied())
	}
	p.cfg.Tracker.OnEndpointSliceUpdate(scaleSlice(256, 0), scaleSlice(256, 1))
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if k.liveApplies.Load() == 0 {
		t.Fatal("a one-Service change was written with notifications paused")
	}
}

// A repair that writes every Service again (the table was deleted) is as big a
// write as a cold sync, though no Service changed: it is written paused too; a
// repair of a few objects is not.
func TestBigRepairPausesNotifications(t *testing.T) {
	k := &pausingKernel{Fake: nft.NewFake()}
	p := overlapProxy(t, k)
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	k.pausedApplies.Store(0)
	if err := k.DeleteTable(t.Context(), nft.FamilyIPv4, TableName); err != nil {
		t.Fatal(err)
	}
	p.noteForeign(nft.Parts{Table: true})
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	holdsDesired(t, k.Fake, p)
	if k.paused.Load() != 0 || k.liveApplies.Load() != 0 || k.pausedApplies.Load() == 0 {
		t.Fatalf("the deleted table's repair: %d transactions paused, %d not, paused %d times after it, want all paused and resumed",
			k.pausedApplies.Load(), k.liveApplies.Load(), k.paused.Load())
	}

	k.Tamper(nft.FamilyIPv4, TableName, chainServices)
	p.noteForeign(nft.Parts{Chains: map[string]bool{chainServices: true}})
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	holdsDesired(t, k.Fake, p)
	if k.liveApplies.Load() == 0 {
		t.Fatal("a one-chain repair was written with notifications paused")
	}
}
