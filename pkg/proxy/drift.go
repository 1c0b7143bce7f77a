package proxy

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"
)

// refreshView re-reads the kernel on the first sync and on resyncs, unless nothing
// was committed since the view was verified, or the last read was so slow that
// reading again now would spend more than a tenth of the time on drift checks.
func (p *Proxy) refreshView(ctx context.Context, full bool, start time.Time, gen0 uint32, genErr error) (read bool, err error) {
	switch {
	case p.view != nil && !full:
		return false, nil
	case p.view != nil && p.verified && genErr == nil && p.cfg.Ledger.accounts(p.verifiedGen, gen0):
		klog.V(4).InfoS("Resync skipped: no nftables commit since the last verified state", "generation", gen0)
		return false, nil
	case p.view != nil && start.Before(p.nextRead):
		klog.V(2).InfoS("Drift check deferred", "until", p.nextRead)
		p.driftDue = p.nextRead
		return false, nil
	}
	readStart := p.cfg.Clock.Now()
	v, err := p.cfg.Kernel.Read(ctx, p.desired.Family, TableName)
	if err != nil {
		return false, fmt.Errorf("read table %s: %w", TableName, err)
	}
	p.view = v
	p.driftDue = time.Time{}
	p.desired.Bind(v)
	p.desired.MarkAllDirty(v)
	took := p.cfg.Clock.Since(readStart)
	p.nextRead = readStart.Add(10 * took)
	p.cfg.Metrics.KernelReadDuration.Observe(took.Seconds())
	return true, nil
}

// noteGeneration keeps the view verified when every commit since gen0 was ours and
// the view was verified at gen0 (or read after it), sibling proxies' commits in
// between aside (see CommitLedger).
func (p *Proxy) noteGeneration(ctx context.Context, gen0 uint32, genErr error, read bool) {
	gen1, err := p.cfg.Kernel.Generation(ctx)
	ours := genErr == nil && err == nil && gen1 == gen0+p.commits
	p.verified = ours && (read || (p.verified && p.cfg.Ledger.accounts(p.verifiedGen, gen0)))
	p.verifiedGen = gen1
	if ours {
		p.cfg.Ledger.record(gen0, gen1)
	}
}
