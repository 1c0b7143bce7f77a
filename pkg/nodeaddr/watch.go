package nodeaddr

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"k8s.io/klog/v2"
)

// WatchConfig says what to select and where to look.
type WatchConfig struct {
	Spec    Spec
	Primary []netip.Addr
	// NetNS is the network namespace whose addresses count (a descriptor of
	// /run/netns/NAME or /proc/PID/ns/net); 0 means the process's own, which is
	// the node's for svcproxy in production.
	NetNS int
	// Resync re-reads every address this often even without an event, in case
	// the kernel dropped notifications (the socket overflowed); 0: 30s.
	Resync time.Duration
	// Settle waits this long after an event for the rest of a burst (an
	// interface coming up brings several addresses); 0: 100ms.
	Settle time.Duration
	// OnChange receives every new selection: once at Start, then on each change.
	OnChange func(Selection)
}

// Watcher keeps a Selection current: it subscribes to the kernel's address
// notifications (RTM_NEWADDR/RTM_DELADDR over rtnetlink) and, on each burst of
// them and every Resync, re-reads the whole address list and selects again.
// Re-reading rather than applying the events one by one means a lost or
// reordered notification cannot leave the selection wrong for longer than Resync.
type Watcher struct {
	cfg    WatchConfig
	handle *netlink.Handle
	ns     netns.NsHandle

	// reselect asks the loop to select again (the primary IPs changed).
	reselect chan struct{}

	mu      sync.Mutex
	cur     Selection
	primary []netip.Addr
}

// Start reads the addresses once, hands the selection to OnChange, and keeps
// watching until ctx ends. It fails only when netlink cannot be opened or read.
func Start(ctx context.Context, cfg WatchConfig) (*Watcher, error) {
	if cfg.Resync <= 0 {
		cfg.Resync = 30 * time.Second
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 100 * time.Millisecond
	}
	w := &Watcher{cfg: cfg, ns: netns.None(), reselect: make(chan struct{}, 1), primary: cfg.Primary}
	if cfg.NetNS != 0 {
		w.ns = netns.NsHandle(cfg.NetNS)
	}
	h, err := netlink.NewHandleAt(w.ns)
	if err != nil {
		return nil, fmt.Errorf("node addresses: netlink: %w", err)
	}
	w.handle = h
	// Subscribe before the first read so that no change falls between them.
	updates, err := w.subscribe(ctx)
	if err != nil {
		h.Close()
		return nil, err
	}
	sel, err := w.read()
	if err != nil {
		h.Close()
		return nil, err
	}
	w.set(sel, true)
	go w.loop(ctx, updates)
	return w, nil
}

// SetPrimary changes the node's primary IPs (its Node object's addresses
// changed) and, when they differ, selects again. kube-proxy exits and is
// restarted with the new ones; the watcher follows them instead.
func (w *Watcher) SetPrimary(primary []netip.Addr) {
	w.mu.Lock()
	same := slices.Equal(primary, w.primary)
	w.primary = slices.Clone(primary)
	w.mu.Unlock()
	if same {
		return
	}
	select {
	case w.reselect <- struct{}{}:
	default: // one is pending already
	}
}

// Current is the latest selection.
func (w *Watcher) Current() Selection {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur
}

func (w *Watcher) subscribe(ctx context.Context) (<-chan netlink.AddrUpdate, error) {
	ch := make(chan netlink.AddrUpdate, 64)
	err := netlink.AddrSubscribeWithOptions(ch, ctx.Done(), netlink.AddrSubscribeOptions{
		Namespace: &w.ns,
		// The library closes ch after a receive error (e.g. ENOBUFS when
		// notifications overflowed); loop then subscribes again and re-reads.
		ErrorCallback: func(err error) { klog.V(2).InfoS("Address notifications", "err", err) },
	})
	if err != nil {
		return nil, fmt.Errorf("node addresses: subscribe: %w", err)
	}
	return ch, nil
}

func (w *Watcher) loop(ctx context.Context, updates <-chan netlink.AddrUpdate) {
	defer w.handle.Close()
	tick := time.NewTicker(w.cfg.Resync)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			drain(updates)
			return
		case _, ok := <-updates:
			if !ok {
				updates = w.resubscribe(ctx)
				if updates == nil {
					return
				}
			} else if !w.settle(ctx, updates) {
				return
			}
		case <-tick.C:
		case <-w.reselect:
		}
		sel, err := w.read()
		if err != nil {
			klog.ErrorS(err, "Reading the node's addresses failed; keeping the last NodePort addresses", "retryIn", w.cfg.Resync)
			continue
		}
		w.set(sel, false)
	}
}

// settle swallows the rest of a burst of notifications; false when ctx ended.
func (w *Watcher) settle(ctx context.Context, updates <-chan netlink.AddrUpdate) bool {
	t := time.NewTimer(w.cfg.Settle)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			drain(updates)
			return false
		case <-t.C:
			return true
		case _, ok := <-updates:
			if !ok {
				return true // the next receive sees the closed channel and resubscribes
			}
		}
	}
}

func (w *Watcher) resubscribe(ctx context.Context) <-chan netlink.AddrUpdate {
	for {
		updates, err := w.subscribe(ctx)
		if err == nil {
			return updates
		}
		klog.ErrorS(err, "Address notifications lost; retrying", "retryIn", time.Second)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// drain lets the library's receiver goroutine finish its last send after the
// socket is closed.
func drain(updates <-chan netlink.AddrUpdate) {
	go func() {
		for range updates {
		}
	}()
}

func (w *Watcher) read() (Selection, error) {
	local, err := LocalAddrs(w.handle)
	if err != nil {
		return Selection{}, err
	}
	w.mu.Lock()
	primary := w.primary
	w.mu.Unlock()
	return Select(w.cfg.Spec, primary, local), nil
}

func (w *Watcher) set(sel Selection, first bool) {
	w.mu.Lock()
	changed := first || !sel.Equal(w.cur)
	w.cur = sel
	w.mu.Unlock()
	if !changed {
		return
	}
	klog.InfoS("NodePort addresses", "nodePortAddresses", w.cfg.Spec.String(), "addresses", sel.Addrs, "allIPv4", sel.AllIPv4, "allIPv6", sel.AllIPv6)
	if w.cfg.OnChange != nil {
		w.cfg.OnChange(sel)
	}
}

// LocalAddrs lists every address on every interface of the handle's namespace,
// up or down, as kube-proxy's net.InterfaceAddrs does. A dump the kernel
// interrupted (addresses changed meanwhile) is read again.
func LocalAddrs(h *netlink.Handle) ([]netip.Addr, error) {
	for try := 0; ; try++ {
		list, err := h.AddrList(nil, netlink.FAMILY_ALL)
		if errors.Is(err, netlink.ErrDumpInterrupted) && try < 5 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("node addresses: list: %w", err)
		}
		out := make([]netip.Addr, 0, len(list))
		for _, a := range list {
			if a.IPNet == nil {
				continue
			}
			if ip, ok := netip.AddrFromSlice(a.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
		return out, nil
	}
}
