package proxy

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// TestMinSyncPeriodCoalescesExactly pins the loop's timing with a fake clock: the
// first change after a quiet period is synced at once; changes that follow within
// MinSyncPeriod are synced together, exactly MinSyncPeriod after that sync.
func TestMinSyncPeriodCoalescesExactly(t *testing.T) {
	const minSync = time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	k := nft.NewFake()
	m := NewMetrics(nil)
	var p *Proxy
	tr := endpoints.NewTracker(endpoints.TrackerOptions{OnChange: func() { p.Trigger() }})
	p = New(Config{Tracker: tr, Kernel: k, Metrics: m, Clock: clk, MinSyncPeriod: minSync, SyncPeriod: time.Hour})
	lastSync := func() time.Time { return time.Unix(0, int64(testutil.ToFloat64(m.LastSync)*1e9)).UTC() }
	// waiters: the resync ticker, plus the min-sync timer while the loop waits on it.
	waiting := func(n int) func() (bool, string) {
		return func() (bool, string) { return clk.Waiters() == n, fmt.Sprintf("%d waiters", clk.Waiters()) }
	}
	runProxy(t, p)
	// The loop records a sync's time after the transaction: wait for that, not for
	// the transaction, before moving the clock.
	syncedAt := func(want time.Time) func() (bool, string) {
		return func() (bool, string) { return lastSync().Equal(want), fmt.Sprintf("last sync at %v", lastSync()) }
	}
	poll.Eventually(t, 10*time.Second, "the first sync", syncedAt(t0))

	clk.Step(10 * time.Second) // quiet
	t1 := clk.Now()
	addWeb(tr, "a", "10.96.0.1", "pod1")
	poll.Eventually(t, 10*time.Second, "the first change after a quiet period, synced at once", syncedAt(t1))
	if n := k.Applied(); n < 2 {
		t.Fatalf("%d transactions, want the change applied", n)
	}
	base := k.Applied()

	for i, name := range []string{"b", "c", "d", "e", "f"} {
		addWeb(tr, name, "10.96.0."+string(rune('2'+i)), "pod1")
		if i == 0 {
			poll.Eventually(t, 10*time.Second, "the loop to wait for the min-sync period", waiting(2))
		}
	}
	clk.Step(minSync - time.Millisecond)
	// A sync now would be early; a loop timing by the wall clock would show it
	// within MinSyncPeriod of real time.
	time.Sleep(minSync + 200*time.Millisecond)
	if n := k.Applied(); n != base || !lastSync().Equal(t1) {
		t.Fatalf("%d transactions (last sync %v) before lastSync+MinSyncPeriod, want none", n-base, lastSync())
	}
	clk.Step(time.Millisecond)
	poll.Eventually(t, 10*time.Second, "the coalesced sync at exactly lastSync+MinSyncPeriod", syncedAt(t1.Add(minSync)))
	if got := route(t, k, "10.96.0.6"); got != "dnat 10.244.1.2:80" {
		t.Fatalf("the last change of the burst: %s", got)
	}
	poll.Eventually(t, 10*time.Second, "the loop to go idle", waiting(1))
	time.Sleep(50 * time.Millisecond)
	if n := k.Applied(); n != base+1 {
		t.Fatalf("%d transactions for 5 changes within MinSyncPeriod, want exactly one", n-base)
	}
}
