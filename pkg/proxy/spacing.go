package proxy

import (
	"slices"
	"syscall"
	"time"
)

// costSpacingFactor is how many times a sync's cost the loop waits after it before
// the next when syncs are spaced by their cost (Config.SpaceByCost): syncing then
// takes about 1/(1+costSpacingFactor) = 10% of a core however fast changes arrive,
// and a change waits about ten times what a sync costs instead of up to a fixed
// second (docs/bench.md, "Spacing syncs by their cost").
const costSpacingFactor = 9

// minCostSpacing is the least spacing under a burst: a sync has costs its own CPU
// time does not show (waking the loop, the informers' and the garbage collector's
// share, the kernel's fixed cost per transaction), and spacing by a 1 ms sync alone
// synced 60 times a second under churn for no latency a client could see. At 30k
// Services with 300 changed a second most syncs sat on this floor: 20 ms gave 2600
// syncs a minute for 9.6-10.3% of a core and a p99 of 25-35 ms, 40 ms 1360 syncs
// for 8.4-8.9% and a p99 of 47-56 ms (docs/bench.md, "The sync floor").
const minCostSpacing = 40 * time.Millisecond

// CostSpacing is the policy's factor and floor, for reports (hack/bench).
func CostSpacing() (factor int, floor time.Duration) { return costSpacingFactor, minCostSpacing }

// recentCosts is how many of the last syncs' costs the spacing is the median of:
// one slow sync (a GC cycle, a full resync) must not hold the next changes for nine
// times its length, and a lasting change of cost shows within a few syncs.
const recentCosts = 5

// syncCosts keeps the CPU time of the last syncs that did something. CPU time, not
// wall time: on a busy machine a sync waits for a core, and spacing by that wait
// would slow programming exactly when other work holds the cores, while the CPU
// the proxy takes is what the spacing bounds. It is the whole process's CPU over
// the sync (informers' work beside it counts, and with two families both syncs),
// which errs toward wider spacing.
type syncCosts struct {
	last [recentCosts]time.Duration
	n    int
	cpu0 time.Duration
	cpu  func() time.Duration // nil: the process's CPU time (processCPU)
}

func (c *syncCosts) now() time.Duration {
	if c.cpu != nil {
		return c.cpu()
	}
	return processCPU()
}

// begin marks a sync's start; end records its cost.
func (c *syncCosts) begin() { c.cpu0 = c.now() }
func (c *syncCosts) end() {
	c.last[c.n%recentCosts] = c.now() - c.cpu0
	c.n++
}

func (c *syncCosts) median() time.Duration {
	k := min(c.n, recentCosts)
	if k == 0 {
		return 0
	}
	s := c.last // a copy: sorting must not reorder the ring
	slices.Sort(s[:k])
	return s[k/2]
}

// spacing is how long after the last sync that did something the next one may start.
func (p *Proxy) spacing() time.Duration {
	if !p.cfg.SpaceByCost {
		return p.cfg.MinSyncPeriod
	}
	return min(p.cfg.MinSyncPeriod, max(minCostSpacing, costSpacingFactor*p.costs.median()))
}

// processCPU is this process's user and system time so far; the kernel's work on
// our netlink transactions is system time of ours.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
