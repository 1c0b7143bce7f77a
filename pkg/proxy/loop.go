package proxy

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"
)

// Trigger asks for a sync soon; it never blocks.
func (p *Proxy) Trigger() {
	now := p.cfg.Clock.Now()
	p.cfg.Metrics.LastQueued.Set(float64(now.UnixNano()) / 1e9)
	if p.cfg.Health != nil {
		p.cfg.Health.Queued(p.cfg.Options.Family, now)
	}
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// RequestResync makes the next sync re-read the kernel and repair any drift.
func (p *Proxy) RequestResync() {
	p.mu.Lock()
	p.needFull = true
	p.resyncs++ // a sync that started before this request does not answer it
	p.mu.Unlock()
}

// RequestRepair is RequestResync, now: another program changed our table, and
// waiting for the periodic resync would leave it broken for up to SyncPeriod. Unlike
// Trigger it queues no change for health: a repair that fails shows as a failed sync.
func (p *Proxy) RequestRepair() {
	p.RequestResync()
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// Run syncs until ctx ends. waitReady blocks until the informers have synced, so that
// the first full sync does not delete Services it has not heard of yet.
func (p *Proxy) Run(ctx context.Context, waitReady func(context.Context) bool) error {
	// Like kube-proxy's SyncLoop: the loop's start counts as an update, so that
	// health shows a first sync that never succeeds, and as the last queued time
	// while the informers sync.
	now := p.cfg.Clock.Now()
	if p.cfg.Health != nil {
		p.cfg.Health.Synced(p.cfg.Options.Family, now)
	}
	p.cfg.Metrics.LastQueued.Set(float64(now.UnixNano()) / 1e9)
	if waitReady != nil && !waitReady(ctx) {
		return fmt.Errorf("informers did not sync: %w", ctx.Err())
	}
	clk := p.cfg.Clock
	resync := clk.NewTicker(nonZero(p.cfg.SyncPeriod, 30*time.Second))
	defer resync.Stop()
	backoff := time.Duration(0)
	var retry <-chan time.Time
	// drift fires when a drift check that was deferred (see refreshView) is due:
	// dropping it would leave a repair asked for now until the next periodic resync.
	var drift <-chan time.Time
	// unanswered fires when the pass over unanswered SYNs that a sync owes is due
	// (see reconcileUnanswered): the sync it wakes makes it.
	var unanswered <-chan time.Time
	p.Trigger()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.trigger:
		case <-resync.C():
			p.RequestResync()
		case <-retry:
		case <-drift:
			drift = nil
			p.RequestResync()
		case <-unanswered:
			unanswered = nil
		}
		retry = nil
		if wait := p.spacing() - clk.Since(p.lastSync); wait > 0 && !p.lastSync.IsZero() {
			select {
			case <-ctx.Done():
				return nil
			case <-clk.After(wait):
			}
		}
		// This sync takes every change queued so far; a trigger left from those
		// changes must not cause an empty sync that restarts the MinSyncPeriod clock.
		select {
		case <-p.trigger:
		default:
		}
		if err := p.Sync(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			backoff = min(max(2*backoff, 100*time.Millisecond), p.cfg.MaxBackoff)
			klog.ErrorS(err, "Sync failed; will retry", "backoff", backoff)
			retry = clk.After(backoff)
			p.syncWhenReleased(ctx)
			continue
		}
		backoff = 0
		if !p.driftDue.IsZero() && drift == nil {
			drift = clk.After(p.driftDue.Sub(clk.Now()))
		}
		if p.unansweredOwed && unanswered == nil {
			unanswered = clk.After(p.nextUnanswered.Sub(clk.Now()))
		}
	}
}

func nonZero(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
