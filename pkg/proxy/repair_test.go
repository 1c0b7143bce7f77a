package proxy

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// TestThrottle pins how foreign changes ask for repairs: the first at once, then at
// most one per interval, and a change seen during an interval is never dropped.
func TestThrottle(t *testing.T) {
	const every = time.Second
	type step struct {
		advance time.Duration // clock step before the calls
		calls   int
		want    int32 // runs of fn so far, once settled
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"first call runs at once", []step{{0, 1, 1}}},
		{"a burst runs once, then once at the interval's end", []step{{0, 5, 1}, {every - time.Millisecond, 0, 1}, {time.Millisecond, 0, 2}}},
		{"calls during the interval are one trailing run", []step{{0, 1, 1}, {100 * time.Millisecond, 3, 1}, {500 * time.Millisecond, 3, 1}, {400 * time.Millisecond, 0, 2}}},
		{"a call after a quiet interval runs at once", []step{{0, 1, 1}, {2 * every, 1, 2}}},
		{"the trailing run starts a new interval", []step{{0, 2, 1}, {every, 0, 2}, {10 * time.Millisecond, 1, 2}, {every - 10*time.Millisecond, 0, 3}}},
		{"never more than one run per interval under steady calls", []step{
			{0, 1, 1}, {250 * time.Millisecond, 1, 1}, {250 * time.Millisecond, 1, 1}, {250 * time.Millisecond, 1, 1},
			{250 * time.Millisecond, 1, 2}, {250 * time.Millisecond, 1, 2}, {250 * time.Millisecond, 1, 2}, {250 * time.Millisecond, 1, 2},
			{250 * time.Millisecond, 1, 3},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			var runs atomic.Int32
			th := &throttle{clk: clk, every: every, fn: func() { runs.Add(1) }}
			for i, s := range tc.steps {
				clk.Step(s.advance)
				for range s.calls {
					th.call()
				}
				poll.Eventually(t, 5*time.Second, fmt.Sprintf("step %d: %d runs", i, s.want), func() (bool, string) {
					return runs.Load() == s.want, fmt.Sprintf("%d runs", runs.Load())
				})
				// A run that should not happen must not happen late either.
				time.Sleep(20 * time.Millisecond)
				if got := runs.Load(); got != s.want {
					t.Fatalf("step %d: %d runs, want %d", i, got, s.want)
				}
			}
		})
	}
}

// A repair asked for while drift checks are deferred (the last read was slow, see
// refreshView) happens once the deferral ends, not at the next periodic resync.
func TestRepairDuringADeferredDriftCheckIsNotDropped(t *testing.T) {
	k := &readCounter{Fake: nft.NewFake()}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	k.onRead = func() { clk.Step(2 * time.Second) } // a big table takes 2 s to read
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	addWeb(tr, "web", "10.96.0.10", "pod1")
	p := New(Config{Tracker: tr, Kernel: k, Clock: clk, SyncPeriod: time.Hour})
	runProxy(t, p)
	poll.Eventually(t, 10*time.Second, "the first sync", func() (bool, string) {
		return route(t, k.Fake, "10.96.0.10") == "dnat 10.244.1.2:80", "not yet"
	})
	k.Tamper(nft.FamilyIPv4, TableName, "lb-1-10")
	p.RequestRepair() // 2 s after a 2 s read: the check is deferred by 18 s
	// The loop waits on the resync ticker and on the deferred check's timer.
	poll.Eventually(t, 10*time.Second, "the deferred drift check to be scheduled", func() (bool, string) {
		return clk.Waiters() == 2, fmt.Sprintf("%d waiters", clk.Waiters())
	})
	if route(t, k.Fake, "10.96.0.10") == "dnat 10.244.1.2:80" {
		t.Fatal("repaired before the deferral ended: the test no longer defers")
	}
	clk.Step(18 * time.Second)
	poll.Eventually(t, 10*time.Second, "the repair once the deferral ended", func() (bool, string) {
		got := route(t, k.Fake, "10.96.0.10")
		return got == "dnat 10.244.1.2:80", got
	})
}

// A resync asked for while a sync runs (a notification of another program's change
// that came after our read) is still pending once that sync is done.
func TestResyncAskedDuringASyncStaysAsked(t *testing.T) {
	k := &readCounter{Fake: nft.NewFake()}
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	addWeb(tr, "web", "10.96.0.10", "pod1")
	p := New(Config{Tracker: tr, Kernel: k})
	asked := false
	k.onRead = func() {
		if !asked {
			asked = true
			p.RequestResync()
		}
	}
	for i, want := range []bool{true, false} {
		if err := p.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		got := p.needFull
		p.mu.Unlock()
		if got != want {
			t.Fatalf("after sync %d: resync pending = %v, want %v", i+1, got, want)
		}
	}
}
