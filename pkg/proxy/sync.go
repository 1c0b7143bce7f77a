package proxy

import (
	"runtime/debug"
	"time"

	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// bigTransaction is the size above which a sync returns freed memory to the OS.
const bigTransaction = 20000

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

func (p *Proxy) fail() { p.cfg.Metrics.SyncFailures.Inc() }
