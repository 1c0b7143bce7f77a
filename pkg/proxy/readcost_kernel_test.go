package proxy

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// TestKernelDriftCheckCost times what a drift check costs when another program
// committed something (so the table must be read back and compared) at
// SVCPROXY_READ_COST Services x 10 endpoints, a third of them NodePorts and every
// sixth with an external IP: the table read alone, and the whole resync (read,
// compare every chain's rules and every element, nothing to write). Skipped
// unless the variable is set:
//
//	SVCPROXY_READ_COST=10000 go test -count=1 -run TestKernelDriftCheckCost -v ./pkg/proxy/
func TestKernelDriftCheckCost(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SVCPROXY_READ_COST"))
	if n == 0 {
		t.Skip("a benchmark: set SVCPROXY_READ_COST=10000 to run it")
	}
	const rounds = 7
	ns := netnstest.New(t, "readcost")
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	for i := 0; i < n; i++ {
		tr.OnServiceAdd(scaleService(i, true))
		tr.OnEndpointSliceAdd(scaleSlice(i, 0))
	}
	k := &nft.Netlink{NetNSFd: ns.Fd}
	counting := &countingKernel{Kernel: k}
	// A clock that stands still: the proxy spaces reads out to ten times their
	// duration, which would defer every resync measured here but the first.
	clk := clocktesting.NewFakeClock(time.Now())
	p := New(Config{Tracker: tr, Kernel: counting, Clock: clk, Options: Options{ClusterCIDR: podCIDR, NodeName: "node-a"}})
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	var reads, readsCPU, resyncs, resyncsCPU []time.Duration
	rules := 0
	for i := range rounds {
		start, cpu0 := time.Now(), processCPU()
		v, err := k.Read(t.Context(), nft.FamilyIPv4, TableName)
		if err != nil {
			t.Fatal(err)
		}
		reads, readsCPU = append(reads, time.Since(start)), append(readsCPU, processCPU()-cpu0)
		rules = 0
		for _, c := range v.Chains {
			rules += len(c.Rules)
		}

		ns.MustRun(t, "nft", "add table ip other"+strconv.Itoa(i)) // another program's commit
		counting.objects = 0
		p.RequestResync()
		start, cpu0 = time.Now(), processCPU()
		if err := p.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		resyncs, resyncsCPU = append(resyncs, time.Since(start)), append(resyncsCPU, processCPU()-cpu0)
		if counting.objects != 0 {
			t.Fatalf("the resync of an unchanged table wrote %d objects", counting.objects)
		}
	}
	med := func(ds []time.Duration) string {
		slices.Sort(ds)
		return fmt.Sprintf("%.1f ms", float64(ds[len(ds)/2].Microseconds())/1000)
	}
	t.Logf("%d Services x10 (a third NodePorts), %d rules: table read %s (CPU %s), resync after a foreign commit %s (CPU %s); medians of %d",
		n, rules, med(reads), med(readsCPU), med(resyncs), med(resyncsCPU), rounds)
}
