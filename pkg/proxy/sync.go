package proxy

import (
	"context"
	"runtime/debug"
	"time"

	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

// bigTransaction is the size above which a sync returns freed memory to the OS.
const bigTransaction = 20000

// Sync renders the Services that changed, brings the view of the kernel up to date
// when a resync is due, and applies the difference (see applyDirty). What the kernel
// accepted is then recorded: Services it refused (see refusals), where UDP and SCTP
// traffic may go (see servingTable), and conntrack is reconciled with it. A failure
// is reported to Health: the kernel is not known to hold the desired state.
func (p *Proxy) Sync(ctx context.Context) error {
	start := p.cfg.Clock.Now()
	p.costs.begin()
	err := p.sync(ctx, start)
	if err != nil && ctx.Err() == nil && p.cfg.Health != nil {
		p.cfg.Health.Failed(p.cfg.Options.Family, start)
	}
	return err
}

func (p *Proxy) sync(ctx context.Context, start time.Time) error {
	p.mu.Lock()
	full, resyncs := p.needFull, p.resyncs
	p.mu.Unlock()

	if err := p.applyNodeAddresses(); err != nil {
		p.fail()
		return err
	}
	p.applyServiceCIDRs()
	c := p.cfg.Tracker.TakeChanges()
	snap, changed := c.Snapshot, c.Changed
	if p.applyZone() {
		changed = withAllServices(snap, changed)
	}
	big := len(changed) > maxOwnersPerTx
	if big {
		defer paceGC(bigSyncGCPercent)()
		defer p.pauseNotifications()()
		p.desired.ReserveElements(elementsEstimate(snap, changed, p.cfg.place()))
		p.desired.ReserveOwners(len(changed))
	}
	p.commits = 0
	// A big sync that must read the whole table anyway (the first, or one after
	// the view was dropped) reads it before rendering: when there is no table,
	// it renders while the kernel commits (renderWriting).
	var w *kernelWindow
	var windowErr error
	if big && p.view == nil {
		if w, windowErr = p.tryOpenWindow(ctx, full, start); w != nil {
			defer w.unlock()
		}
	}
	objects, syncErr := 0, error(nil)
	if w != nil && !p.view.TableExists && !p.overlapFailed {
		objects, syncErr = p.renderWriting(ctx, snap, changed)
	} else {
		for k := range changed {
			p.renderService(snap, k, ServiceOwner(k))
		}
	}
	p.programming.add(c.TriggerTimes)
	if len(changed) > 0 {
		refreshOnDemand(p.desired)
	}
	logConflicts(p.desired)
	rendered := p.cfg.Clock.Now()

	if w == nil {
		if windowErr == nil {
			w, windowErr = p.openWindow(ctx, full, start, false)
		}
		if windowErr != nil {
			return windowErr // the changes are rendered: the next sync writes them
		}
		defer w.unlock()
	}
	p.adoptRead()
	if !big && p.desired.DirtyOwnerCount() > maxOwnersPerTx {
		// A repair writing a deleted table again, or a resync that found much
		// changed: as big a write as a cold start's (275k elements at 10k
		// Services), and as costly with the kernel building a notification for each.
		defer p.pauseNotifications()()
	}
	if syncErr == nil {
		// What is left: all of it, or after renderWriting the chains that
		// depend on every Service (refreshOnDemand).
		var n int
		n, syncErr = p.applyChanges(ctx)
		objects += n
	}
	committed := p.cfg.Clock.Now()
	phases := w.phases(start, rendered, committed)
	p.programming.observe(p.settle(), committed, p.cfg.Metrics)
	if syncErr != nil && objects == 0 {
		return syncErr
	}
	if syncErr == nil {
		p.overlapFailed = false
		p.mu.Lock()
		// A resync asked for during this sync (another program's change seen
		// after our read) stays asked for.
		p.needFull = p.needFull && p.resyncs != resyncs
		p.mu.Unlock()
	}
	p.sweepAffinity(ctx) // before noteGeneration: its commit is ours
	p.noteGeneration(ctx, w.gen0, w.genErr, w.read)
	w.unlock()
	p.reconcileConntrack(full)
	p.reconcileUnanswered(snap, full || objects > 0)
	p.releaseMemory(objects)
	p.recordSync(start, phases, full, len(changed), objects, syncErr == nil)
	return syncErr
}

// renderService renders Service k of snap, whose owner is owner (ServiceOwner),
// into the desired ruleset, and the tables kept beside it.
func (p *Proxy) renderService(snap endpoints.Snapshot, k endpoints.ServiceKey, owner string) {
	svc := snap.Service(k)
	ports := svc.Ports()
	p.scratch.Reset()
	renderServiceInto(&p.scratch, ports, svc, p.cfg.Options, lastRendering{p.desired, owner})
	f := p.lb.intern(p.scratch)
	p.desired.SetFragment(owner, f)
	p.serving.render(owner, servingOf(ports, svc))
	p.affinity.render(owner, stickyOf(f))
	p.noLocal.update(k, ports, svc, p.cfg.place())
	p.health.update(k, ports, svc, p.cfg.NodeName)
}

// settle records what the kernel now holds: every owner whose changes are no longer
// pending has been programmed (or had nothing to program). It returns the owners
// still pending.
func (p *Proxy) settle() map[string]bool {
	pending := map[string]bool{}
	for _, o := range p.desired.DirtyOwners() {
		pending[o] = true
	}
	p.serving.commit(pending)
	p.affinity.commit(pending)
	p.refused.settle(pending)
	list := p.refused.list()
	p.cfg.Metrics.RefusedServices.Set(float64(len(list)))
	if p.cfg.Health != nil {
		p.cfg.Health.SetRefused(p.cfg.Options.Family, list)
	}
	return pending
}

// releaseMemory hands the memory of a big transaction back to the OS: a cold load
// builds hundreds of MiB of netlink messages that are garbage once the kernel
// answered, and the process would otherwise stay at its peak size until the next GC
// cycles. Only for a transaction that rewrote a good part of the table: the full
// GC it forces costs in proportion to the whole heap (1-3 s of wall time at 30k
// Services on a loaded machine), and a sync catching up after a stall under churn
// (thousands of Services, tens of thousands of objects) that paid it stalled the
// next sync longer still.
func (p *Proxy) releaseMemory(objects int) {
	if worthReleasing(objects, p.desired.ElementCount()) {
		if k, ok := p.cfg.Kernel.(interface{ ReleaseBuffers() }); ok {
			k.ReleaseBuffers() // the biggest batch's buffer (nft.Netlink)
		}
		debug.FreeOSMemory()
	}
}

// worthReleasing: a transaction of objects was big, and rewrote more than a quarter
// of a table of elements.
func worthReleasing(objects, elements int) bool {
	return objects > bigTransaction && 4*objects > elements
}

// recordSync updates metrics and health after a sync that changed the kernel or
// found nothing to change; ok reports that nothing was refused.
func (p *Proxy) recordSync(start time.Time, ph syncPhases, full bool, services, objects int, ok bool) {
	end := p.cfg.Clock.Now()
	if services > 0 || objects > 0 {
		p.lastSync = end // burst control counts syncs that did something
		p.costs.end()
	}
	elapsed := end.Sub(start).Seconds()
	p.cfg.Metrics.SyncDuration.Observe(elapsed)
	if full {
		p.cfg.Metrics.FullSyncDuration.Observe(elapsed)
	} else {
		p.cfg.Metrics.PartialSyncDuration.Observe(elapsed)
	}
	p.cfg.Metrics.LastSync.Set(float64(end.UnixNano()) / 1e9)
	p.cfg.Metrics.TxObjects.Observe(float64(objects))
	p.cfg.Metrics.NoLocalEndpointsInternal.Set(float64(p.noLocal.total))
	p.cfg.Metrics.NoLocalEndpointsExternal.Set(float64(p.noLocal.external))
	// Like kube-proxy, whose failed sync never updates lastUpdated: a refused
	// Service is a queued change not programmed, and health says so after the
	// timeout.
	if p.cfg.Health != nil && ok {
		p.cfg.Health.Synced(p.cfg.Options.Family, end)
	}
	if p.cfg.OnSynced != nil && ok {
		p.cfg.OnSynced()
	}
	// Unlike OnSynced, also when another Service was refused: a Service's local
	// endpoints are counted from what the cluster says, and the count must not stall.
	p.health.notify(p.cfg.OnHealthCheckServices)
	klog.V(2).InfoS("Synced", "full", full, "services", services, "objects", objects, "elapsed", end.Sub(start),
		"render", ph.render, "waitLedger", ph.ledger, "generationAndRead", ph.read, "apply", ph.apply)
}

func (p *Proxy) fail() { p.cfg.Metrics.SyncFailures.Inc() }

// syncPhases is how long the last sync took up to its commit, step by step: what a
// change waits for before the kernel has it (the rest of "elapsed" comes after the
// commit: conntrack, health). The "Synced" log line carries them.
type syncPhases struct {
	render time.Duration // tracker changes taken, Services rendered into the desired ruleset
	ledger time.Duration // waiting for the other family's proxy to finish its commit
	read   time.Duration // the kernel's generation, and any read back
	apply  time.Duration // plan and transaction, until the kernel acknowledged it
}
