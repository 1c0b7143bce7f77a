package proxy

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
)

// boundHeap lowers the Go runtime's soft memory limit, for the duration of a sync
// applied in several transactions, to half again the heap live at its start (what
// the desired ruleset and the tracker hold) plus room for one transaction. Each
// transaction builds tens of MiB of netlink messages that are garbage once the
// kernel answered; with the default pacing the heap may double the live heap before
// the collector runs, and a 30k cold start peaked near 1 GiB of RSS for 0.4 GiB
// live. A limit the user set (GOMEMLIMIT) is never raised. It returns the function
// that restores the previous limit.
func boundHeap(perTx uint64) (restore func()) {
	prev := debug.SetMemoryLimit(-1)
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 || sample[1].Value.Kind() != metrics.KindUint64 {
		return func() {}
	}
	// The live heap is as of the last collection, which may predate the rendering
	// of this sync: never below what the heap holds now, or the collector would run
	// back to back.
	limit := max(sample[0].Value.Uint64()*3/2, sample[1].Value.Uint64()) + perTx
	if limit > math.MaxInt64 || int64(limit) >= prev {
		return func() {}
	}
	debug.SetMemoryLimit(int64(limit))
	return func() { debug.SetMemoryLimit(prev) }
}
