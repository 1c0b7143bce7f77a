package proxy

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/nft"
)

// refreshView re-reads the kernel on the first sync and on resyncs, unless nothing
// was committed since the view was verified, or the last read was so slow that
// reading again now would spend more than a tenth of the time on drift checks.
// Otherwise it reads back the parts another program changed (see readParts), if
// any: those reads are not deferred.
func (p *Proxy) refreshView(ctx context.Context, full bool, parts nft.Parts, start time.Time, gen0 uint32, genErr error) (read bool, err error) {
	switch {
	case p.view != nil && !full:
		return p.readParts(ctx, parts)
	case p.view != nil && p.verified && genErr == nil && p.cfg.Ledger.accounts(p.verifiedGen, gen0):
		klog.V(4).InfoS("Resync skipped: no nftables commit since the last verified state", "generation", gen0)
		return p.readParts(ctx, parts)
	case p.view != nil && start.Before(p.nextRead):
		klog.V(2).InfoS("Drift check deferred", "until", p.nextRead)
		p.driftDue = p.nextRead
		return p.readParts(ctx, parts)
	}
	readStart := p.cfg.Clock.Now()
	v, err := p.cfg.Kernel.Read(ctx, p.desired.Family, TableName)
	if err != nil {
		return false, fmt.Errorf("read table %s: %w", TableName, err)
	}
	if p.adoptLater && v.TableExists {
		p.view = v // adopted once the sync rendered (see openWindow)
	} else {
		p.adopt(v)
		p.adoptLater = false
	}
	p.driftDue = time.Time{}
	took := p.cfg.Clock.Since(readStart)
	p.nextRead = readStart.Add(10 * took)
	p.cfg.Metrics.KernelReadDuration.Observe(took.Seconds())
	return true, nil
}

// adopt makes v, a view of the whole table, the view, and the next plan compare
// everything with it.
func (p *Proxy) adopt(v *nft.View) {
	p.view = v
	p.desired.Bind(v)
	p.desired.MarkAllDirty(v)
}

// partReader is a Kernel that reads parts of a table back (nft.Netlink).
type partReader interface {
	ReadParts(ctx context.Context, family nft.Family, table string, parts nft.Parts) (*nft.View, error)
}

// readParts brings the view of the parts another program changed up to date and
// makes the next plan compare them: a repair costs what the change touched, not a
// read and compare of the whole table (at 10k Services 0.36-0.8 s to read, ~2 s
// with the compare, on 2 loaded cores), so it is not deferred like a whole read;
// its rate is bounded by WatchForeignChanges' (minRepairInterval). read reports
// that the view was replaced whole (the table was gone): then the view is
// emptied in place (View.Forget), not replaced by the part read, which would
// make Bind hand the old view back what it held, only to drop it.
func (p *Proxy) readParts(ctx context.Context, parts nft.Parts) (read bool, err error) {
	if parts.Empty() {
		return false, nil
	}
	k, ok := p.cfg.Kernel.(partReader)
	if !ok {
		// Parts come from the kernel's notifications: a kernel without them has none.
		return false, nil
	}
	readStart := p.cfg.Clock.Now()
	part, err := k.ReadParts(ctx, p.desired.Family, TableName, parts)
	if err != nil {
		return false, fmt.Errorf("read back what another program changed in table %s: %w", TableName, err)
	}
	p.cfg.Metrics.KernelPartialReadDuration.Observe(p.cfg.Clock.Since(readStart).Seconds())
	p.view.ReplaceParts(part, parts) // emptied when the table is gone
	if !part.TableExists {
		// Everything is to be written again: the next plan compares every
		// owner's chains and elements with a view that holds nothing.
		p.desired.MarkAllDirty(p.view)
	} else {
		p.desired.MarkPartsDirty(p.view, parts)
	}
	klog.V(2).InfoS("Read back what another program changed", "table", !part.TableExists || parts.Table,
		"chains", len(parts.Chains), "sets", len(parts.Sets), "took", p.cfg.Clock.Since(readStart))
	return !part.TableExists, nil
}

// noteGeneration keeps the view verified when every commit since gen0 was ours and
// the view was verified at gen0 (or read after it), sibling proxies' commits in
// between aside (see CommitLedger).
//
// After a commit, the generation is the one the kernel reported with it
// (nft.Netlink.CommittedGeneration) rather than read again: a round trip of every
// sync, 0.12 CPU s a minute of make bench's churn at 30k. A foreign commit after
// ours is then found by the next window's first read of the generation, which
// the ledger does not account for, instead of by this one.
func (p *Proxy) noteGeneration(ctx context.Context, gen0 uint32, genErr error, read bool) {
	gen1, err := p.generationAfter(ctx)
	ours := genErr == nil && err == nil && gen1 == gen0+p.commits
	p.verified = ours && (read || (p.verified && p.cfg.Ledger.accounts(p.verifiedGen, gen0)))
	p.verifiedGen = gen1
	if ours {
		p.cfg.Ledger.record(gen0, gen1)
	}
}

// committedGenerations is a Kernel that reports the generation each commit made.
type committedGenerations interface {
	CommittedGeneration() (uint32, bool)
}

// generationAfter is the generation after this sync's commits.
func (p *Proxy) generationAfter(ctx context.Context) (uint32, error) {
	if k, ok := p.cfg.Kernel.(committedGenerations); ok && p.commits > 0 {
		if gen, ok := k.CommittedGeneration(); ok {
			return gen, nil
		}
	}
	return p.cfg.Kernel.Generation(ctx)
}
