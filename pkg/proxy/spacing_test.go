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

func TestSpacing(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name   string
		byCost bool
		costs  []time.Duration
		want   time.Duration
	}{
		{name: "fixed: MinSyncPeriod, whatever the cost", costs: []time.Duration{ms}, want: time.Second},
		{name: "by cost, no sync yet: the floor", byCost: true, want: minCostSpacing},
		{name: "by cost, cheap syncs: the floor", byCost: true, costs: []time.Duration{ms, ms, ms}, want: minCostSpacing},
		{name: "by cost: nine times the cost", byCost: true, costs: []time.Duration{10 * ms, 10 * ms, 10 * ms}, want: 90 * ms},
		{name: "one slow sync does not count", byCost: true, costs: []time.Duration{10 * ms, 10 * ms, 900 * ms, 10 * ms, 10 * ms}, want: 90 * ms},
		{name: "a lasting change of cost shows", byCost: true, costs: []time.Duration{10 * ms, 10 * ms, 30 * ms, 30 * ms, 30 * ms}, want: 270 * ms},
		{name: "only the last five count", byCost: true, costs: []time.Duration{500 * ms, 500 * ms, 500 * ms, 5 * ms, 5 * ms, 5 * ms, 5 * ms, 5 * ms}, want: 45 * ms},
		{name: "never past MinSyncPeriod", byCost: true, costs: []time.Duration{300 * ms}, want: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(Config{Kernel: nft.NewFake(), MinSyncPeriod: time.Second, SpaceByCost: tc.byCost})
			var cpu time.Duration
			p.costs.cpu = func() time.Duration { return cpu }
			for _, c := range tc.costs {
				p.costs.begin()
				cpu += c
				p.costs.end()
			}
			if got := p.spacing(); got != tc.want {
				t.Fatalf("spacing %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSpaceByCostCoalesces: with syncs spaced by their cost, changes that follow a
// sync are synced together nine times its cost later, not MinSyncPeriod later.
func TestSpaceByCostCoalesces(t *testing.T) {
	const cost = 10 * time.Millisecond
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	k := nft.NewFake()
	m := NewMetrics(nil)
	var p *Proxy
	tr := endpoints.NewTracker(endpoints.TrackerOptions{OnChange: func() { p.Trigger() }})
	p = New(Config{Tracker: tr, Kernel: k, Metrics: m, Clock: clk, MinSyncPeriod: time.Second, SpaceByCost: true, SyncPeriod: time.Hour})
	var calls int
	p.costs.cpu = func() time.Duration { calls++; return time.Duration(calls/2) * cost } // every sync costs 10 ms
	lastSync := func() time.Time { return time.Unix(0, int64(testutil.ToFloat64(m.LastSync)*1e9)).UTC() }
	syncedAt := func(want time.Time) func() (bool, string) {
		// LastSync is a gauge of float seconds: equal to a microsecond.
		return func() (bool, string) {
			return lastSync().Sub(want).Abs() < time.Microsecond, fmt.Sprintf("last sync at %v", lastSync())
		}
	}
	runProxy(t, p)
	poll.Eventually(t, 10*time.Second, "the first sync", syncedAt(t0))
	clk.Step(10 * time.Second)
	t1 := clk.Now()
	addWeb(tr, "a", "10.96.0.1", "pod1")
	poll.Eventually(t, 10*time.Second, "the first change after a quiet period, synced at once", syncedAt(t1))

	addWeb(tr, "b", "10.96.0.2", "pod1")
	addWeb(tr, "c", "10.96.0.3", "pod1")
	poll.Eventually(t, 10*time.Second, "the loop to wait", func() (bool, string) {
		return clk.Waiters() == 2, fmt.Sprintf("%d waiters", clk.Waiters())
	})
	clk.Step(costSpacingFactor*cost - time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	if !lastSync().Equal(t1) {
		t.Fatalf("synced at %v, before nine times the last sync's cost", lastSync())
	}
	clk.Step(time.Millisecond)
	poll.Eventually(t, 10*time.Second, "the burst synced nine times the cost after the last sync", syncedAt(t1.Add(costSpacingFactor*cost)))
	if got := route(t, k, "10.96.0.3"); got != "dnat 10.244.1.2:80" {
		t.Fatalf("the last change of the burst: %s", got)
	}
}
