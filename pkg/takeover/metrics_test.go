package takeover

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRemovedObjectsMetric: every kind is exported at 0 before a takeover, and
// reports add up by kind.
func TestRemovedObjectsMetric(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c := NewRemovedObjects(reg)
	Report{}.CountRemoved(nil) // no counter: nothing to do
	for _, r := range []Report{
		{Removed: map[Kind]int{KindChain: 9, KindJumpRule: 6}},
		{Removed: map[Kind]int{KindChain: 1, KindTable: 1}},
	} {
		r.CountRemoved(c)
	}
	const want = `# HELP svcproxy_takeover_removed_objects_total Objects kube-proxy left in the kernel that svcproxy removed, by kind.
# TYPE svcproxy_takeover_removed_objects_total counter
svcproxy_takeover_removed_objects_total{kind="iptables-chain"} 10
svcproxy_takeover_removed_objects_total{kind="iptables-jump-rule"} 6
svcproxy_takeover_removed_objects_total{kind="ipset"} 0
svcproxy_takeover_removed_objects_total{kind="ipvs-service"} 0
svcproxy_takeover_removed_objects_total{kind="link"} 0
svcproxy_takeover_removed_objects_total{kind="nftables-table"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
