package proxy

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/svcproxy/svcproxy/pkg/nft"
)

// foreignWatcher is a Kernel that reports other programs' changes to a table
// (nft.Netlink; the fake kernel has no other programs).
type foreignWatcher interface {
	WatchForeign(ctx context.Context, family nft.Family, table string, changed func()) error
}

// minRepairInterval bounds how often foreign changes ask for a repair, whatever
// MinSyncPeriod says: a program that rewrites our table in a loop must not make
// svcproxy read and rewrite it in a loop too.
const minRepairInterval = time.Second

// watchRetry is how long WatchForeignChanges waits before subscribing again after
// the notification socket failed.
const watchRetry = time.Second

// WatchForeignChanges repairs the table as soon as another program changes it,
// rather than at the next periodic resync (up to SyncPeriod later): it follows the
// kernel's nftables notifications and asks for a repair (RequestRepair) at most once
// per MinSyncPeriod (at least a second); a change seen meanwhile is repaired when
// that interval ends. Our own transactions' notifications are ignored by the kernel
// connection. It returns when ctx ends, at once with a kernel that cannot report
// changes.
func (p *Proxy) WatchForeignChanges(ctx context.Context) {
	w, ok := p.cfg.Kernel.(foreignWatcher)
	if !ok {
		return
	}
	t := &throttle{clk: p.cfg.Clock, every: max(p.cfg.MinSyncPeriod, minRepairInterval), fn: p.RequestRepair}
	changed := func() {
		p.cfg.Metrics.ForeignChanges.Inc()
		klog.V(2).InfoS("Another program changed our table; repairing it", "table", p.desired.Family.String()+" "+TableName)
		t.call()
	}
	for {
		err := w.WatchForeign(ctx, p.desired.Family, TableName, changed)
		if ctx.Err() != nil {
			return
		}
		// Changes made while nobody listened are only found by a resync.
		klog.ErrorS(err, "Following nftables notifications failed; subscribing again", "retryIn", watchRetry)
		t.call()
		select {
		case <-ctx.Done():
			return
		case <-p.cfg.Clock.After(watchRetry):
		}
	}
}

// throttle runs fn at once on a call, unless it ran less than every ago: then once
// when every has passed since that run, however many calls came meanwhile. A call is
// never lost, and fn never runs more often than every.
type throttle struct {
	clk   clock.Clock
	every time.Duration
	fn    func()

	mu      sync.Mutex
	last    time.Time // when fn last ran (zero: never)
	pending bool      // a run is scheduled for the end of the interval
}

func (t *throttle) call() {
	t.mu.Lock()
	if t.pending {
		t.mu.Unlock()
		return
	}
	now := t.clk.Now()
	if t.last.IsZero() || now.Sub(t.last) >= t.every {
		t.last = now
		t.mu.Unlock()
		t.fn()
		return
	}
	t.pending = true
	wait := t.every - now.Sub(t.last)
	t.mu.Unlock()
	after := t.clk.After(wait)
	go func() {
		<-after
		t.mu.Lock()
		t.pending, t.last = false, t.clk.Now()
		t.mu.Unlock()
		t.fn()
	}()
}
