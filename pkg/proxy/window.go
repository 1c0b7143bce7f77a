package proxy

import (
	"context"
	"time"

	"github.com/svcproxy/svcproxy/pkg/nft"
)

// kernelWindow is the part of a sync that holds the ledger (see Ledger): from the
// kernel's generation before svcproxy's first commit to the note of the one after
// its last, with what the kernel holds read in between.
type kernelWindow struct {
	gen0     uint32
	genErr   error
	read     bool // the view was read whole (refreshView)
	locked0  time.Time
	readDone time.Time
	unlock   func()
}

// openWindow takes the ledger, reads the kernel's generation, checks the anchor
// table and brings the view up to date (refreshView). On an error the ledger is
// released and the failure counted.
//
// Opened before the sync renders (early), a table read whole is adopted only
// after the rendering (adoptRead), as when the window opens after it: adopting
// it into a ruleset that holds nothing yet would mark each of its elements for
// deletion, one map entry each (1.6M at 100k Services), only for the rendering
// to want them back. A table that is not there is adopted at once.
func (p *Proxy) openWindow(ctx context.Context, full bool, start time.Time, early bool) (*kernelWindow, error) {
	p.cfg.Ledger.lock()
	return p.openLocked(ctx, full, start, early)
}

// tryOpenWindow opens the window early, before the rendering, unless a sibling
// holds the ledger (nil, nil): the other family's big first sync renders and
// writes in its window, and this proxy renders beside it, on the other core,
// rather than after it.
func (p *Proxy) tryOpenWindow(ctx context.Context, full bool, start time.Time) (*kernelWindow, error) {
	if !p.cfg.Ledger.tryLock() {
		return nil, nil
	}
	return p.openLocked(ctx, full, start, true)
}

// openLocked is openWindow once the ledger is taken.
func (p *Proxy) openLocked(ctx context.Context, full bool, start time.Time, early bool) (*kernelWindow, error) {
	p.adoptLater = early
	locked := true
	w := &kernelWindow{locked0: p.cfg.Clock.Now()}
	w.unlock = func() {
		if locked {
			p.cfg.Ledger.unlock()
			locked = false
		}
	}
	w.gen0, w.genErr = p.cfg.Kernel.Generation(ctx)
	// Before the main table's read, which may fail: the anchor matters most when
	// the main table cannot be written. A resync checks it unless, as for the main
	// table (refreshView), nothing but our own commits came since it was checked.
	quiet := p.view != nil && p.verified && w.genErr == nil && p.cfg.Ledger.accounts(p.verifiedGen, w.gen0)
	p.ensureAnchor(ctx, full && !quiet)
	p.mu.Lock()
	parts := p.foreign // what other programs changed, for refreshView to read back
	p.foreign = nft.Parts{}
	p.mu.Unlock()
	read, err := p.refreshView(ctx, full, parts, start, w.gen0, w.genErr)
	if err != nil {
		p.noteForeign(parts) // still to read back
		p.fail()
		w.unlock()
		return nil, err
	}
	w.read, w.readDone = read, p.cfg.Clock.Now()
	return w, nil
}

// phases splits a sync that rendered until rendered and committed at committed.
// A window opened before the rendering (renderWriting) counts the rendering,
// and the writing done meanwhile, as render.
func (w *kernelWindow) phases(start, rendered, committed time.Time) syncPhases {
	if w.locked0.Before(rendered) {
		return syncPhases{render: rendered.Sub(start), apply: committed.Sub(rendered)}
	}
	return syncPhases{render: rendered.Sub(start), ledger: w.locked0.Sub(rendered), read: w.readDone.Sub(w.locked0), apply: committed.Sub(w.readDone)}
}

// adoptRead adopts the view an early window read (see openWindow), now that the
// sync rendered.
func (p *Proxy) adoptRead() {
	if p.adoptLater {
		p.adoptLater = false
		if p.view != nil {
			p.adopt(p.view)
		}
	}
}
