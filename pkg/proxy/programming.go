package proxy

import (
	"time"

	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

// programmingTimes holds the EndpointSlice trigger times of changes not yet
// committed to the kernel, by owner, so that the network programming latency is
// observed when the transaction that programs a change commits, even when that is a
// later sync than the one that rendered it (a refused or failed transaction).
type programmingTimes map[string][]time.Time

func (pt programmingTimes) add(triggers map[endpoints.ServiceKey][]time.Time) {
	for k, tt := range triggers {
		o := ServiceOwner(k)
		pt[o] = append(pt[o], tt...)
	}
}

// observe records, for every owner no longer pending, the time from each trigger
// to committed, and forgets them.
func (pt programmingTimes) observe(pending map[string]bool, committed time.Time, m *Metrics) {
	for o, tt := range pt {
		if pending[o] {
			continue
		}
		for _, t := range tt {
			m.ProgrammingLatency.Observe(committed.Sub(t).Seconds())
			klog.V(4).InfoS("Network programming", "owner", o, "elapsed", committed.Sub(t))
		}
		delete(pt, o)
	}
}
