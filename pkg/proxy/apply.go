package proxy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// maxOwnersPerTx bounds how many Services one transaction carries. 1000 rather
// than 2000: a 30k cold start peaked 8 MiB lower and took less CPU (3.5 against
// 4.2-4.5 s in make bench's process); 500 was worse again on both.
const maxOwnersPerTx = 1000

// txPerBigSync is how many transactions a sync of more than maxOwnersPerTx x
// txPerBigSync Services is written in (ownersPerTx).
const txPerBigSync = 20

// ownersPerTx is how many of n changed Services one transaction carries:
// maxOwnersPerTx, or more so that a big sync takes at most txPerBigSync commits.
// Each commit costs the kernel time that grows with the table, not only with
// the commit (likely the validation of the jumps and gotos a commit adds, which
// walks the verdict maps whole): in a 100k cold sync, 100 commits took 15 ms
// each at first and 35-55 ms at the end, 2.5-2.9 s of sendmsg in all, against
// 1.5-1.7 s in 20. The transaction then holds a twentieth of the table at most,
// which bounds the peak in proportion to the ruleset (+10-18 MiB at 100k).
func ownersPerTx(n int) int {
	return max(maxOwnersPerTx, (n+txPerBigSync-1)/txPerBigSync)
}

// txHeapRoom is the heap one transaction of maxOwnersPerTx Services x 10 endpoints
// takes while it is built and sent (measured: ~50 MiB live for 2000 at 30k), with
// room to spare.
const txHeapRoom = 32 << 20

// applyChanges brings the kernel to the desired ruleset: in place, or by recreating
// the table when its layout cannot be changed in place. It returns the objects
// written. The view was compatible when the last changes were planned (a
// recreation makes it so), and what was read into it since is marked: the
// changes alone are checked.
func (p *Proxy) applyChanges(ctx context.Context) (int, error) {
	if !nft.ChangesCompatible(p.desired, p.view) {
		return p.recreate(ctx)
	}
	return p.applyDirty(ctx)
}

// recreate rebuilds the table in the same transaction that deletes it, so traffic
// sees the old rules or the new ones: after an upgrade changed a set's or chain's
// kind, the kernel refuses to change it in place.
func (p *Proxy) recreate(ctx context.Context) (int, error) {
	klog.InfoS("Table layout changed; recreating it atomically", "table", TableName)
	tx := nft.PlanFull(p.desired, nft.NewView())
	tx.Recreate = true
	if err := p.cfg.Kernel.Apply(ctx, tx); err != nil {
		p.fail()
		p.desired.Requeue(tx)
		return 0, fmt.Errorf("recreate table %s: %w", TableName, err)
	}
	p.view = nft.NewView()
	p.desired.Bind(p.view)
	p.view.Commit(tx)
	p.commits++
	return tx.Size(), nil
}

// applyDirty applies every pending change: in one transaction, or, when more than
// maxOwnersPerTx Services changed at once (a cold start, a mass update), in
// transactions of that many Services each, which bounds the memory a batch takes
// (each Service's change stays atomic). It returns the objects written.
func (p *Proxy) applyDirty(ctx context.Context) (int, error) {
	owners := p.desired.DirtyOwners() // sorted: the stale "" owner and "skeleton" come first
	if len(owners) <= maxOwnersPerTx {
		return p.apply(ctx, nft.Plan(p.desired, p.view))
	}
	defer boundHeap(txHeapRoom)()
	per := ownersPerTx(len(owners))
	if !p.view.TableExists && !p.overlapFailed {
		return p.applyOverlapped(ctx, owners, per)
	}
	objects := 0
	for len(owners) > 0 {
		n := min(len(owners), per)
		written, err := p.apply(ctx, nft.PlanOwners(p.desired, p.view, owners[:n]...))
		objects += written
		if err != nil {
			return objects, err
		}
		owners = owners[n:]
	}
	return objects, nil
}

// applyOverlapped writes, in transactions of per Services as applyDirty does, a
// table the kernel no longer holds (another program deleted it): each
// transaction is planned while the kernel commits the one before, on
// another core. At 10k Services a deleted table's repair planned 27k elements in
// 25-75 ms and the kernel took 60-85 ms to commit them, eleven times over, one
// after the other: 1.2-1.6 s of broken Services.
//
// A big first sync that finds no table (a node's first start) goes further:
// renderWriting. Overlapping its transactions alone took a 100k cold start
// from 6.3 to 5.3 s (30k: 1.7 to 1.4-1.5 s) in make bench's process; the
// second transaction alive beside the one in flight, which had kept it off,
// costs 3-7 MiB of peak at 30k since the plans stopped materializing elements.
//
// The next plan must see what the transaction in flight creates (the sets, the
// shared chains, elements owners share), so the view records each transaction
// when it is sent, not when the kernel accepted it. If the kernel refuses one,
// the view is no longer known: it is dropped, so that the next sync reads the
// table back whole, and that sync writes one transaction after the other
// (overlapFailed), retrying the Services of a refused one each on its own
// (applyEach); only a single Service is then held back. A transaction's
// owners stay atomic either way.
func (p *Proxy) applyOverlapped(ctx context.Context, owners []string, per int) (int, error) {
	w := p.newOverlapWriter()
	for len(owners) > 0 {
		n := min(len(owners), per)
		if err := w.write(ctx, nft.PlanOwners(p.desired, p.view, owners[:n]...)); err != nil {
			return w.objects, err
		}
		owners = owners[n:]
	}
	return w.objects, w.finish()
}

// renderWriting renders the changed Services of a sync that found no table,
// ownersPerTx at a time in the order of their owners, and writes each lot (and
// whatever else is pending: the skeleton, with the first) while the next
// renders: the kernel's commits were 1.5-1.7 s of a 100k cold start, which the
// rendering (3.3 s) now hides. Overlapped as applyOverlapped writes: after a
// refusal the view is dropped, and the rest is rendered but not written, for
// the next sync (which reads the table back) to write.
func (p *Proxy) renderWriting(ctx context.Context, snap endpoints.Snapshot, changed map[endpoints.ServiceKey]struct{}) (int, error) {
	type service struct {
		owner string
		key   endpoints.ServiceKey
	}
	todo := make([]service, 0, len(changed))
	for k := range changed {
		todo = append(todo, service{ServiceOwner(k), k})
	}
	slices.SortFunc(todo, func(a, b service) int { return strings.Compare(a.owner, b.owner) })
	per := ownersPerTx(len(todo))
	w := p.newOverlapWriter()
	var err error
	for len(todo) > 0 {
		n := min(len(todo), per)
		for _, s := range todo[:n] {
			p.renderService(snap, s.key, s.owner)
		}
		todo = todo[n:]
		if err == nil {
			err = w.write(ctx, nft.Plan(p.desired, p.view))
		}
	}
	if err != nil {
		return w.objects, err
	}
	return w.objects, w.finish()
}

// overlapWriter sends transactions one at a time, each planned by its caller
// while the kernel commits the one before, on another core (applyOverlapped).
type overlapWriter struct {
	p        *Proxy
	inflight *nft.Tx
	done     chan error
	objects  int
}

func (p *Proxy) newOverlapWriter() *overlapWriter {
	return &overlapWriter{p: p, done: make(chan error, 1)}
}

// write waits for the transaction in flight and sends tx. The view records tx
// when it is sent, so that the next plan builds on it. When the one in flight
// was refused, tx is requeued and the view dropped (overlapFail): nothing more
// may be written in this sync.
func (w *overlapWriter) write(ctx context.Context, tx *nft.Tx) error {
	if err := w.wait(); err != nil {
		w.p.desired.Requeue(tx)
		return w.p.overlapFail(err)
	}
	w.inflight = tx
	go func() { w.done <- w.p.cfg.Kernel.Apply(ctx, tx) }()
	// Apply only reads tx; Commit only reads it too.
	w.p.view.Commit(tx)
	return nil
}

// finish waits for the last transaction.
func (w *overlapWriter) finish() error {
	if err := w.wait(); err != nil {
		return w.p.overlapFail(err)
	}
	return nil
}

// wait waits for the transaction in flight, if any.
func (w *overlapWriter) wait() error {
	if w.inflight == nil {
		return nil
	}
	tx := w.inflight
	w.inflight = nil
	if err := <-w.done; err != nil {
		w.p.desired.Requeue(tx)
		return fmt.Errorf("apply transaction of %d objects for %d owners: %w", tx.Size(), len(tx.Owners()), err)
	}
	if !tx.Empty() {
		w.p.commits++ // an empty transaction is never sent (see apply)
	}
	w.objects += tx.Size()
	return nil
}

// overlapFail records that a transaction applyOverlapped sent failed: the view
// holds what the kernel refused, and is dropped.
func (p *Proxy) overlapFail(err error) error {
	p.fail()
	p.view = nil
	p.overlapFailed = true
	p.mu.Lock()
	p.needFull = true
	p.mu.Unlock()
	return err
}

// apply sends one transaction; when the kernel refuses a transaction of several
// owners it retries them one by one.
func (p *Proxy) apply(ctx context.Context, tx *nft.Tx) (int, error) {
	if err := p.cfg.Kernel.Apply(ctx, tx); err != nil {
		p.fail()
		p.desired.Requeue(tx)
		unknown := errors.Is(err, nft.ErrOutcomeUnknown)
		if unknown {
			p.mu.Lock()
			p.needFull = true
			p.mu.Unlock()
		}
		if unknown || len(tx.Owners()) <= 1 {
			if !unknown && ctx.Err() == nil {
				for _, o := range tx.Owners() {
					p.refused.note(o, err, p.cfg.OnRefused)
				}
			}
			return 0, fmt.Errorf("apply transaction of %d objects for %v: %w", tx.Size(), tx.Owners(), err)
		}
		// One bad Service must not hold back the others: retry each on its own.
		return tx.Size(), p.applyEach(ctx, tx.Owners(), err)
	}
	p.view.Commit(tx)
	if !tx.Empty() {
		// An empty transaction is never sent (Netlink.Apply): counting it made a
		// sync with nothing to change look like another program's commit went
		// missing, and the next resync read the whole table back.
		p.commits++
	}
	return tx.Size(), nil
}

// applyEach applies each owner's changes in its own transaction after the kernel
// refused them together. Owners that still fail stay queued for the next retry and
// are logged once each; the others land now.
func (p *Proxy) applyEach(ctx context.Context, owners []string, batchErr error) error {
	var failed []string
	for _, owner := range owners {
		tx := nft.PlanOwners(p.desired, p.view, owner)
		if tx.Empty() {
			continue
		}
		if err := p.cfg.Kernel.Apply(ctx, tx); err != nil {
			p.desired.Requeue(tx)
			failed = append(failed, owner)
			p.cfg.Metrics.RefusedChanges.Inc()
			klog.ErrorS(err, "Kernel refused the rules of one owner; others are applied", "owner", owner)
			if ctx.Err() == nil {
				p.refused.note(owner, err, p.cfg.OnRefused)
			}
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
