package proxy

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// midSyncKernel is the node's kernel, with another program's change committed
// just before our second transaction to the main table: within a big first sync,
// while the notifications are paused.
type midSyncKernel struct {
	*nft.Netlink
	applies atomic.Int32
	foreign func() error
	err     atomic.Value // the foreign change's error, if any
}

func (k *midSyncKernel) Apply(ctx context.Context, tx *nft.Tx) error {
	if tx.Table == TableName && k.applies.Add(1) == 2 {
		if err := k.foreign(); err != nil {
			k.err.Store(err)
		}
	}
	return k.Netlink.Apply(ctx, tx)
}

// TestKernelForeignChangeWhilePausedRepaired: another program's change made while
// a big sync had the notifications paused is repaired at once, not at the next
// periodic resync (an hour here): the watcher reports the pause on resume, and
// the resync that follows sees the foreign commit in the kernel's generation.
func TestKernelForeignChangeWhilePausedRepaired(t *testing.T) {
	e := newKenv(t)
	for i := 256; i < 256+overlapServices; i++ {
		e.tr.OnServiceAdd(scaleService(i, true))
		e.tr.OnEndpointSliceAdd(scaleSlice(i, 0))
	}
	addWeb(e.tr, "web", "10.96.0.10", "pod1")
	k := &midSyncKernel{Netlink: e.kernel, foreign: func() error {
		_, err := e.w.Node.Run("nft", "add chain ip "+TableName+" intruder")
		return err
	}}
	m := NewMetrics(nil)
	p := New(Config{Tracker: e.tr, Kernel: k, Metrics: m, Options: e.p.cfg.Options,
		SyncPeriod: time.Hour, MinSyncPeriod: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.WatchForeignChanges(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// The watcher subscribes in its own time: until it hears another program,
	// which the first sync then overwrites.
	poll.Eventually(t, 5*time.Second, "the watcher subscribed", func() (bool, string) {
		e.w.Node.MustRun(t, "nft", "add table ip "+TableName+"; delete table ip "+TableName)
		time.Sleep(20 * time.Millisecond)
		return testutil.ToFloat64(m.ForeignChanges) > 0, "no foreign change heard"
	})
	runProxy(t, p)

	poll.Eventually(t, 30*time.Second, "the intruder chain added mid-sync, then removed", func() (bool, string) {
		if k.applies.Load() < 2 {
			return false, "the sync's second transaction not sent yet"
		}
		if err, _ := k.err.Load().(error); err != nil {
			t.Fatalf("the foreign change: %v", err)
		}
		out, err := e.w.Node.Run("nft", "list", "chain", "ip", TableName, "intruder")
		return err != nil, "still there: " + out
	})
	body, err := e.client.Get("10.96.0.10:80", time.Second)
	if err != nil || body != "pod1" {
		t.Fatalf("web after the repair: %q, %v", body, err)
	}
}
