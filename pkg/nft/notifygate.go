package nft

import (
	"sync"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// NotifyGate pauses the nftables notifications of one network namespace's
// watchers (WatchForeign) while a big write of ours is committed. While any
// socket of the namespace listens, the kernel builds a notification of every
// element each transaction writes (nf_tables checks for listeners first): a
// 100k-Service cold sync, 1.6M elements, took 6.2-7.5 s and 10.3-11.9 CPU s
// with one watcher against 4.7-5.1 s and 7.5-8.1 CPU s without (make bench's
// process, `-monitor`), and the socket overran anyway. A node's two families
// must share one gate: each family's watcher listens to the whole namespace.
//
// A watcher paused misses what anyone commits meanwhile; on resume it reports
// every table it follows with Parts{All, Unwatched}, as it does after an
// overrun, and the proxy's next resync finds any foreign commit by the
// kernel's generation (Ledger). The zero value is ready to use.
type NotifyGate struct {
	mu       sync.Mutex
	paused   int
	watchers map[*gateWatcher]struct{}
}

// gateWatcher is one WatchForeign subscription.
type gateWatcher struct {
	conn    *netlink.Conn
	joined  bool
	missed  func() // reports every followed table as possibly changed; called without g.mu
	joinErr error  // why resume could not subscribe it again (its socket is closed)
}

// err is why w's socket was closed by resume, if it was.
func (g *NotifyGate) err(w *gateWatcher) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return w.joinErr
}

// join registers w and subscribes it unless the gate is paused (then resume
// does, and reports what it missed).
func (g *NotifyGate) join(w *gateWatcher) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.watchers == nil {
		g.watchers = map[*gateWatcher]struct{}{}
	}
	g.watchers[w] = struct{}{}
	if g.paused > 0 {
		return nil
	}
	if err := w.conn.JoinGroup(unix.NFNLGRP_NFTABLES); err != nil {
		delete(g.watchers, w)
		return err
	}
	w.joined = true
	return nil
}

// leave unregisters w (its socket is being closed).
func (g *NotifyGate) leave(w *gateWatcher) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.watchers, w)
}

// Pause unsubscribes every watcher until the returned resume is called (once;
// pauses nest). A watcher that cannot unsubscribe stays subscribed: the
// kernel's work is then not spared, and nothing is missed.
func (g *NotifyGate) Pause() (resume func()) {
	g.mu.Lock()
	g.paused++
	if g.paused == 1 {
		for w := range g.watchers {
			if !w.joined {
				continue
			}
			if w.conn.LeaveGroup(unix.NFNLGRP_NFTABLES) != nil {
				continue
			}
			w.joined = false
		}
	}
	g.mu.Unlock()
	var once sync.Once
	return func() { once.Do(g.resume) }
}

func (g *NotifyGate) resume() {
	g.mu.Lock()
	g.paused--
	var missed []func()
	if g.paused == 0 {
		for w := range g.watchers {
			if w.joined {
				continue
			}
			missed = append(missed, w.missed)
			if err := w.conn.JoinGroup(unix.NFNLGRP_NFTABLES); err != nil {
				// Closing ends the watcher's read: WatchForeign returns this
				// error, and its caller subscribes again.
				w.joinErr = err
				_ = w.conn.Close()
				continue
			}
			w.joined = true
		}
	}
	g.mu.Unlock()
	for _, f := range missed {
		f()
	}
}
