package takeover

import (
	"context"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// RunAndLog removes kube-proxy's leftovers (Run), counts what it removed in
// removed (from NewRemovedObjects; nil: not counted) and logs the outcome once:
// what was removed, what iptables-legacy still holds and how to remove it.
func RunAndLog(ctx context.Context, o Options, removed *prometheus.CounterVec) error {
	r, err := Run(ctx, o)
	r.CountRemoved(removed)
	for _, k := range r.Kept {
		klog.InfoS("Warning: kept a kube-proxy chain another program's rule jumps to", "chain", k)
	}
	if len(r.Legacy) > 0 {
		klog.InfoS("Warning: kube-proxy's iptables-legacy rules remain; netlink cannot edit iptables-legacy, run this on the node",
			"chains", r.Legacy, "command", r.LegacyHint)
	}
	klog.InfoS("Took over from kube-proxy", "removed", r.String())
	return err
}

// syncAttempts bounds the takeovers tried after syncs: a failure that lasts (a
// kube-proxy object the kernel will not delete) is logged that many times, not
// after every sync for the life of the process.
const syncAttempts = 5

// AfterSync returns the proxy's OnSynced hook: the first sync that programmed
// every Service starts the takeover in the background (the sync loop goes on; our
// table already serves), and a failed takeover is tried again after a later sync, up
// to syncAttempts times.
func AfterSync(ctx context.Context, removed *prometheus.CounterVec) func() {
	return afterSync(ctx, func(ctx context.Context) error { return RunAndLog(ctx, Options{}, removed) })
}

// afterSync is AfterSync with the takeover as run.
func afterSync(ctx context.Context, run func(context.Context) error) func() {
	var running, done atomic.Bool
	var failed atomic.Int32
	return func() {
		if done.Load() || !running.CompareAndSwap(false, true) {
			return
		}
		go func() {
			defer running.Store(false)
			err := run(ctx)
			if err == nil {
				done.Store(true)
				return
			}
			if n := failed.Add(1); n < syncAttempts {
				klog.ErrorS(err, "Taking over from kube-proxy failed; will retry after the next sync", "attempt", n)
				return
			}
			klog.ErrorS(err, "Taking over from kube-proxy failed; giving up (svcproxy --cleanup retries it)", "attempts", syncAttempts)
			done.Store(true)
		}()
	}
}
