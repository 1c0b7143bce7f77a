package proxy

import (
	"math"
	"runtime/debug"
	"runtime/metrics"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

// bigSyncGCPercent is the collector's pacing (GOGC) while a sync renders and applies
// more than maxOwnersPerTx Services: the rendering of a cold start makes hundreds of
// MiB of short-lived fragments while the desired ruleset grows, and with the default
// 100 the heap reached twice the live heap before the transactions even started.
// 35 rather than 50 since the live heap is smaller and the render makes less
// garbage: the 30k cold start's peak fell 14 MiB (200 -> 186 MiB) for 5-10% more
// CPU (3.4 -> 3.6-3.75 s) in make bench's process.
const bigSyncGCPercent = 35

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

// paceGC sets the collector's pacing to percent for the duration of a big sync, and
// returns the function that restores it. A lower setting the user made (GOGC, or
// off) is kept.
func paceGC(percent int) (restore func()) {
	prev := debug.SetGCPercent(percent)
	if prev < 0 || prev <= percent {
		debug.SetGCPercent(prev)
		return func() {}
	}
	return func() { debug.SetGCPercent(prev) }
}

// elementsEstimate is about how many elements the changed Services render: per
// port an element per endpoint and a hairpin element per endpoint that may be a pod
// here, its dispatch, its ClusterIP and perhaps a sticky port (RenderServiceWith;
// external paths add a few more).
func elementsEstimate(snap endpoints.Snapshot, changed map[endpoints.ServiceKey]struct{}, here endpoints.Place) int {
	n := 0
	for k := range changed {
		svc := snap.Service(k)
		for _, sp := range svc.Ports() {
			eps := svc.Endpoints(sp.Name)
			n += len(eps) + 3
			for _, e := range eps {
				if hairpinHere(e, here) {
					n++
				}
			}
		}
	}
	return n
}
