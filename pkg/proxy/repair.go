package proxy

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/svcproxy/svcproxy/pkg/nft"
)

// foreignWatcher is a Kernel that reports other programs' changes to tables
// (nft.Netlink; the fake kernel has no other programs).
type foreignWatcher interface {
	WatchForeign(ctx context.Context, family nft.Family, tables []string, changed func(table string, p nft.Parts)) error
}

// notificationPauser is a Kernel whose notifications a big write can pause
// (nft.Netlink; see nft.NotifyGate).
type notificationPauser interface {
	PauseNotifications() (resume func())
}

// pauseNotifications pauses the kernel's notifications for the writes of a big
// sync: the kernel builds one per element while anyone listens. The watchers
// report every table as possibly changed when the returned func resumes them,
// and the resync that follows reads back only if another program committed.
func (p *Proxy) pauseNotifications() (resume func()) {
	if np, ok := p.cfg.Kernel.(notificationPauser); ok {
		return np.PauseNotifications()
	}
	return func() {}
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
// kernel's nftables notifications, notes the parts they name (noteForeign), and asks
// for a sync at most once per MinSyncPeriod (at least a second); a change seen
// meanwhile is repaired when that interval ends. That sync reads back and compares
// only the named parts (readParts), so a repair costs what the change touched, and
// the watcher asks for at most one per interval: whatever another program rewrites
// in a loop, CPU is bounded by one repair of what changed per interval, plus what
// syncs that run anyway for Service changes (spaced by MinSyncPeriod) take along. Our own transactions'
// notifications are ignored by the kernel connection. A change to the anchor table
// (anchor.go) asks for a check of the whole anchor, a few objects, in the same way.
// It returns when ctx ends, at once with a kernel that cannot report changes.
func (p *Proxy) WatchForeignChanges(ctx context.Context) {
	w, ok := p.cfg.Kernel.(foreignWatcher)
	if !ok {
		return
	}
	t := &throttle{clk: p.cfg.Clock, every: max(p.cfg.MinSyncPeriod, minRepairInterval), fn: p.wake}
	changed := func(table string, parts nft.Parts) {
		if table == AnchorTableName {
			// Lost notifications are counted once, with the main table's.
			if !parts.All {
				p.cfg.Metrics.ForeignChanges.Inc()
				klog.V(2).InfoS("Another program changed our anchor table; repairing it", "table", p.anchor.Family.String()+" "+AnchorTableName)
			}
			p.noteAnchor()
			t.call()
			return
		}
		if parts.Unwatched {
			klog.V(4).InfoS("Notifications were paused for a big write; checking the table", "table", p.desired.Family.String()+" "+TableName)
		} else {
			p.cfg.Metrics.ForeignChanges.Inc()
			klog.V(2).InfoS("Another program changed our table; repairing it", "table", p.desired.Family.String()+" "+TableName,
				"all", parts.All, "tableItself", parts.Table, "chains", len(parts.Chains), "sets", len(parts.Sets))
		}
		p.noteForeign(parts)
		t.call()
	}
	for {
		err := w.WatchForeign(ctx, p.desired.Family, []string{TableName, AnchorTableName}, changed)
		if ctx.Err() != nil {
			return
		}
		// Changes made while nobody listened are only found by a resync (which
		// checks the anchor too).
		klog.ErrorS(err, "Following nftables notifications failed; subscribing again", "retryIn", watchRetry)
		p.noteForeign(nft.Parts{All: true})
		t.call()
		select {
		case <-ctx.Done():
			return
		case <-p.cfg.Clock.After(watchRetry):
		}
	}
}

// noteForeign records that another program changed parts of our table, for the
// next sync to read back (see readParts); a change not known by name asks for a
// resync, which reads the whole table.
func (p *Proxy) noteForeign(parts nft.Parts) {
	if parts.All {
		p.RequestResync()
		return
	}
	p.mu.Lock()
	p.foreign.Add(parts)
	p.mu.Unlock()
}

// wake asks for a sync now, without queuing a change for health (see RequestRepair).
func (p *Proxy) wake() {
	select {
	case p.trigger <- struct{}{}:
	default:
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
