package main

import (
	"context"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/takeover"
)

// Taking over from kube-proxy. kube-proxy's leftovers (its iptables-nft chains, its
// nftables tables, kube-ipvs0 and its IPVS services and ipsets) are removed on every
// start, in cluster and --manifests mode alike (both program the node's kernel, which
// kube-proxy's rules would otherwise share), once our first sync has programmed every
// Service; and by --cleanup. Ordering: while both exist, new connections already
// follow our rules, not kube-proxy's: NAT chains of one priority (both are dstnat,
// -100) run in reverse order of registration, and the first to translate a connection
// decides it, so our chains, registered after kube-proxy's, win; kube-proxy's rules
// are removed only after our first sync, in one transaction per family, so a new
// connection always finds one of the two. --takeover=false leaves kube-proxy's rules
// alone (to run svcproxy next to a kube-proxy on purpose, e.g. to compare them).

// addTakeoverFlag registers --takeover on fs, stored inverted in o.noTakeover so that
// the zero options take over, like kube-proxy, which always cleans up after the other
// modes.
func addTakeoverFlag(fs *pflag.FlagSet, o *options) {
	fs.Var((*invertedBool)(&o.noTakeover), "takeover",
		"After the first sync, remove what kube-proxy left in the kernel (iptables-nft chains, nftables tables, kube-ipvs0, IPVS services, ipsets); false to run next to a kube-proxy.")
	fs.Lookup("takeover").NoOptDefVal = "true"
}

// invertedBool is a bool flag that stores the negation of its value.
type invertedBool bool

func (b *invertedBool) String() string { return strconv.FormatBool(!bool(*b)) }
func (b *invertedBool) Type() string   { return "bool" }
func (b *invertedBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*b = invertedBool(!v)
	return nil
}

// takeOver removes kube-proxy's leftovers and logs the outcome once: what was
// removed, what iptables-legacy still holds and how to remove it.
func takeOver(ctx context.Context, o takeover.Options, removed *prometheus.CounterVec) error {
	r, err := takeover.Run(ctx, o)
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

// takeoverAttempts bounds the takeovers tried after syncs: a failure that lasts (a
// kube-proxy object the kernel will not delete) is logged that many times, not
// after every sync for the life of the process.
const takeoverAttempts = 5

// takeoverAfterSync returns the proxy's OnSynced hook: the first sync that programmed
// every Service starts the takeover in the background (the sync loop goes on; our
// table already serves), and a failed takeover is tried again after a later sync, up
// to takeoverAttempts times.
func takeoverAfterSync(ctx context.Context, removed *prometheus.CounterVec) func() {
	var running, done atomic.Bool
	var failed atomic.Int32
	return func() {
		if done.Load() || !running.CompareAndSwap(false, true) {
			return
		}
		go func() {
			defer running.Store(false)
			err := takeOver(ctx, takeover.Options{}, removed)
			if err == nil {
				done.Store(true)
				return
			}
			if n := failed.Add(1); n < takeoverAttempts {
				klog.ErrorS(err, "Taking over from kube-proxy failed; will retry after the next sync", "attempt", n)
				return
			}
			klog.ErrorS(err, "Taking over from kube-proxy failed; giving up (svcproxy --cleanup retries it)", "attempts", takeoverAttempts)
			done.Store(true)
		}()
	}
}
