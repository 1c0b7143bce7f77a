package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// bigTransaction is the size above which a sync returns freed memory to the OS.
const bigTransaction = 20000

// maxOwnersPerTx bounds how many Services one transaction carries.
const maxOwnersPerTx = 5000

// ConntrackCleaner deletes UDP conntrack entries towards an endpoint that is gone.
type ConntrackCleaner interface {
	ClearUDP(service netip.AddrPort, endpoint netip.Addr) (uint, error)
}

// Config wires a Proxy.
type Config struct {
	Options
	Tracker *endpoints.Tracker
	Kernel  nft.Kernel
	// Conntrack may be nil (no cleanup, e.g. the fake kernel).
	Conntrack ConntrackCleaner
	Metrics   *Metrics
	Health    *Health
	// SyncPeriod is how often the kernel is re-read and repaired (kube-proxy --sync-period).
	SyncPeriod time.Duration
	// MinSyncPeriod bounds how often changes are synced (kube-proxy --min-sync-period).
	// The first change after a quiet period is synced at once.
	MinSyncPeriod time.Duration
	// MaxBackoff bounds the retry delay after a failed transaction.
	MaxBackoff time.Duration
	Now        func() time.Time
}

// Proxy is the reconcile loop: tracker -> render changed Services -> plan against the
// kernel view -> one transaction.
type Proxy struct {
	cfg     Config
	desired *nft.Ruleset
	view    *nft.View
	trigger chan struct{}
	// udpEndpoints remembers, per Service and UDP port, where traffic may have been
	// sent, so the conntrack entries of removed endpoints can be deleted after a sync.
	udpEndpoints map[endpoints.ServiceKey]map[endpoints.ServicePortName]udpTarget

	mu       sync.Mutex
	needFull bool
	lastSync time.Time

	// verifiedGen is the ruleset generation at which the view was last known to equal
	// the kernel (read, or only our own commits since). A periodic resync at that
	// generation has nothing to compare: no program committed anything.
	verifiedGen uint32
	verified    bool
	nextRead    time.Time // earliest time for the next drift-check read
	commits     uint32    // our commits during the current Sync
}

type udpTarget struct {
	service netip.AddrPort
	eps     []netip.Addr
}

// New returns a Proxy; Run starts it.
func New(cfg Config) *Proxy {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	return &Proxy{
		cfg:          cfg,
		desired:      NewRuleset(cfg.Options),
		trigger:      make(chan struct{}, 1),
		udpEndpoints: map[endpoints.ServiceKey]map[endpoints.ServicePortName]udpTarget{},
		needFull:     true,
	}
}

// Trigger asks for a sync soon; it never blocks.
func (p *Proxy) Trigger() {
	now := p.cfg.Now()
	p.cfg.Metrics.LastQueued.Set(float64(now.UnixNano()) / 1e9)
	if p.cfg.Health != nil {
		p.cfg.Health.Queued(now)
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
	p.mu.Unlock()
}

// Run syncs until ctx ends. waitReady blocks until the informers have synced, so that
// the first full sync does not delete Services it has not heard of yet.
func (p *Proxy) Run(ctx context.Context, waitReady func(context.Context) bool) error {
	if waitReady != nil && !waitReady(ctx) {
		return fmt.Errorf("informers did not sync: %w", ctx.Err())
	}
	resync := time.NewTicker(nonZero(p.cfg.SyncPeriod, 30*time.Second))
	defer resync.Stop()
	backoff := time.Duration(0)
	var retry <-chan time.Time
	p.Trigger()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.trigger:
		case <-resync.C:
			p.RequestResync()
		case <-retry:
		}
		retry = nil
		if wait := p.cfg.MinSyncPeriod - p.cfg.Now().Sub(p.lastSync); wait > 0 && !p.lastSync.IsZero() {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
		// This sync takes every change queued so far; a trigger left from those
		// changes must not cause an empty sync that restarts the MinSyncPeriod clock.
		select {
		case <-p.trigger:
		default:
		}
		if err := p.Sync(); err != nil {
			backoff = min(max(2*backoff, 100*time.Millisecond), p.cfg.MaxBackoff)
			klog.ErrorS(err, "Sync failed; will retry", "backoff", backoff)
			retry = time.After(backoff)
			continue
		}
		backoff = 0
	}
}

// Sync renders the Services that changed, brings the view of the kernel up to date
// when a resync is due, and applies the difference (see applyDirty).
func (p *Proxy) Sync() error {
	start := p.cfg.Now()
	p.mu.Lock()
	full := p.needFull
	p.mu.Unlock()

	snap, changed, firstEvent := p.cfg.Tracker.Take()
	oldUDP := map[endpoints.ServiceKey]map[endpoints.ServicePortName]udpTarget{}
	for k := range changed {
		ports := snap.ServicePortsOf(k)
		p.desired.SetFragment(ServiceOwner(k), RenderService(ports, snap.Endpoints, p.cfg.NodeName))
		oldUDP[k] = p.udpEndpoints[k]
		if udp := udpTargets(ports, snap.Endpoints, p.cfg.NodeName); len(udp) > 0 {
			p.udpEndpoints[k] = udp
		} else {
			delete(p.udpEndpoints, k)
		}
	}
	p.cfg.Metrics.ServiceChanges.Add(float64(len(changed)))

	p.commits = 0
	gen0, genErr := p.cfg.Kernel.Generation()
	read, err := p.refreshView(full, start, gen0, genErr)
	if err != nil {
		p.fail()
		return err
	}
	var objects int
	var syncErr error
	if !nft.Compatible(p.desired, p.view) {
		objects, err = p.recreate()
		if err != nil {
			return err
		}
	} else {
		objects, syncErr = p.applyDirty()
		if syncErr != nil && objects == 0 {
			return syncErr
		}
	}
	if syncErr == nil {
		p.mu.Lock()
		p.needFull = false
		p.mu.Unlock()
	}
	p.noteGeneration(gen0, genErr, read)
	p.clearStaleUDP(oldUDP)
	if objects > bigTransaction {
		// A cold load builds hundreds of MiB of netlink messages that are garbage
		// once the kernel answered; hand them back now rather than keeping the
		// process at its peak size until the next GC cycles.
		debug.FreeOSMemory()
	}
	p.recordSync(start, full, len(changed), objects, firstEvent)
	return syncErr
}

// refreshView re-reads the kernel on the first sync and on resyncs, unless nothing
// was committed since the view was verified, or the last read was so slow that
// reading again now would spend more than a tenth of the time on drift checks.
func (p *Proxy) refreshView(full bool, start time.Time, gen0 uint32, genErr error) (read bool, err error) {
	switch {
	case p.view != nil && !full:
		return false, nil
	case p.view != nil && p.verified && genErr == nil && gen0 == p.verifiedGen:
		klog.V(4).InfoS("Resync skipped: no nftables commit since the last verified state", "generation", gen0)
		return false, nil
	case p.view != nil && start.Before(p.nextRead):
		klog.V(2).InfoS("Drift check deferred", "until", p.nextRead)
		return false, nil
	}
	readStart := p.cfg.Now()
	v, err := p.cfg.Kernel.Read(nft.FamilyIPv4, TableName)
	if err != nil {
		return false, fmt.Errorf("read table %s: %w", TableName, err)
	}
	p.view = v
	p.desired.MarkAllDirty(v)
	took := p.cfg.Now().Sub(readStart)
	p.nextRead = readStart.Add(10 * took)
	p.cfg.Metrics.KernelReadDuration.Observe(took.Seconds())
	return true, nil
}

// recreate rebuilds the table in the same transaction that deletes it, so traffic
// sees the old rules or the new ones: after an upgrade changed a set's or chain's
// kind, the kernel refuses to change it in place.
func (p *Proxy) recreate() (int, error) {
	klog.InfoS("Table layout changed; recreating it atomically", "table", TableName)
	tx := nft.PlanFull(p.desired, nft.NewView())
	tx.Recreate = true
	if err := p.cfg.Kernel.Apply(tx); err != nil {
		p.fail()
		p.desired.Requeue(tx)
		return 0, fmt.Errorf("recreate table %s: %w", TableName, err)
	}
	p.view = nft.NewView()
	p.view.Commit(tx)
	p.commits++
	return tx.Size(), nil
}

func (p *Proxy) recordSync(start time.Time, full bool, services, objects int, firstEvent time.Time) {
	end := p.cfg.Now()
	if services > 0 || objects > 0 {
		p.lastSync = end // burst control counts syncs that did something
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
	if !firstEvent.IsZero() {
		p.cfg.Metrics.ProgrammingLatency.Observe(end.Sub(firstEvent).Seconds())
	}
	if p.cfg.Health != nil {
		p.cfg.Health.Synced(end)
	}
	klog.V(2).InfoS("Synced", "full", full, "services", services, "objects", objects, "elapsed", end.Sub(start))
}

// applyDirty applies every pending change: in one transaction, or, when more than
// maxOwnersPerTx Services changed at once (a cold start, a mass update), in
// transactions of that many Services each, which bounds the memory a batch takes
// (each Service's change stays atomic). It returns the objects written.
func (p *Proxy) applyDirty() (int, error) {
	owners := p.desired.DirtyOwners() // sorted: the stale "" owner and "skeleton" come first
	if len(owners) <= maxOwnersPerTx {
		return p.apply(nft.Plan(p.desired, p.view))
	}
	objects := 0
	for len(owners) > 0 {
		n := min(len(owners), maxOwnersPerTx)
		written, err := p.apply(nft.PlanOwners(p.desired, p.view, owners[:n]...))
		objects += written
		if err != nil {
			return objects, err
		}
		owners = owners[n:]
	}
	return objects, nil
}

// apply sends one transaction; when the kernel refuses a transaction of several
// owners it retries them one by one.
func (p *Proxy) apply(tx *nft.Tx) (int, error) {
	if err := p.cfg.Kernel.Apply(tx); err != nil {
		p.fail()
		p.desired.Requeue(tx)
		if errors.Is(err, nft.ErrOutcomeUnknown) {
			p.mu.Lock()
			p.needFull = true
			p.mu.Unlock()
		}
		if errors.Is(err, nft.ErrOutcomeUnknown) || len(tx.Owners()) <= 1 {
			return 0, fmt.Errorf("apply transaction of %d objects for %v: %w", tx.Size(), tx.Owners(), err)
		}
		// One bad Service must not hold back the others: retry each on its own.
		return tx.Size(), p.applyEach(tx.Owners(), err)
	}
	p.view.Commit(tx)
	p.commits++
	return tx.Size(), nil
}

// applyEach applies each owner's changes in its own transaction after the kernel
// refused them together. Owners that still fail stay queued for the next retry and
// are logged once each; the others land now.
func (p *Proxy) applyEach(owners []string, batchErr error) error {
	var failed []string
	for _, owner := range owners {
		tx := nft.PlanOwners(p.desired, p.view, owner)
		if tx.Empty() {
			continue
		}
		if err := p.cfg.Kernel.Apply(tx); err != nil {
			p.desired.Requeue(tx)
			failed = append(failed, owner)
			p.cfg.Metrics.RefusedChanges.Inc()
			klog.ErrorS(err, "Kernel refused the rules of one owner; others are applied", "owner", owner)
			continue
		}
		p.view.Commit(tx)
		p.commits++
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("kernel refused the changes of %v (batch error: %w)", failed, batchErr)
}

// noteGeneration keeps the view verified when every commit since gen0 was ours and
// the view was verified at gen0 (or read after it).
func (p *Proxy) noteGeneration(gen0 uint32, genErr error, read bool) {
	gen1, err := p.cfg.Kernel.Generation()
	p.verified = genErr == nil && err == nil && gen1 == gen0+p.commits && (read || (p.verified && p.verifiedGen == gen0))
	p.verifiedGen = gen1
}

func (p *Proxy) fail() { p.cfg.Metrics.SyncFailures.Inc() }

// udpTargets lists, per UDP port, the endpoints new connections may go to: the same
// choice the rendered rules make.
func udpTargets(ports []endpoints.ServicePort, eps map[endpoints.ServicePortName][]endpoints.Endpoint, node string) map[endpoints.ServicePortName]udpTarget {
	var out map[endpoints.ServicePortName]udpTarget
	for _, sp := range ports {
		if sp.Name.Protocol != "UDP" {
			continue
		}
		t := udpTarget{service: netip.AddrPortFrom(sp.ClusterIP, sp.Port)}
		usable, _ := targets(sp, eps[sp.Name], node)
		for _, e := range usable {
			t.eps = append(t.eps, e.Addr)
		}
		if out == nil {
			out = map[endpoints.ServicePortName]udpTarget{}
		}
		out[sp.Name] = t
	}
	return out
}

// clearStaleUDP deletes conntrack entries that still point at endpoints removed by
// the sync that just landed; without it a UDP client that keeps sending from the same
// port stays pinned to a dead endpoint.
func (p *Proxy) clearStaleUDP(old map[endpoints.ServiceKey]map[endpoints.ServicePortName]udpTarget) {
	if p.cfg.Conntrack == nil {
		return
	}
	for k, ports := range old {
		for n, before := range ports {
			after := p.udpEndpoints[k][n]
			for _, e := range before.eps {
				if after.service == before.service && slices.Contains(after.eps, e) {
					continue
				}
				deleted, err := p.cfg.Conntrack.ClearUDP(before.service, e)
				if err != nil {
					klog.ErrorS(err, "Clearing stale UDP conntrack entries", "servicePort", n.String())
					continue
				}
				p.cfg.Metrics.ConntrackDeleted.Add(float64(deleted))
			}
		}
	}
}

func nonZero(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Desired exposes the desired ruleset (read-only use: tracing, tests).
func (p *Proxy) Desired() *nft.Ruleset { return p.desired }
