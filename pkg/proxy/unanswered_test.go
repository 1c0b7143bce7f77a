package proxy

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/svcproxy/svcproxy/pkg/conntrack"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// TestUnansweredSYNsTowardsServices: after a sync that changed the kernel, the
// unanswered SYN entries towards a TCP Service address go unless their reply
// source is one of its serving endpoints: untranslated (the ClusterIP itself) and
// towards a removed endpoint go, an in-flight SYN to a current endpoint stays, and
// addresses that are not a TCP Service's (a pod, a UDP port) are left alone. A sync
// that changed nothing does not dump the table.
func TestUnansweredSYNsTowardsServices(t *testing.T) {
	web := conntrack.Service{Proto: nft.ProtoTCP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 80}
	pod := func(name string, port uint16) netip.AddrPort {
		return netip.AddrPortFrom(netip.MustParseAddr(podIPs[name]), port)
	}
	podAddr := conntrack.Service{Proto: nft.ProtoTCP, Addr: netip.MustParseAddr(podIPs["pod2"]), Port: 80}
	udpPort := conntrack.Service{Proto: nft.ProtoTCP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 53} // the Service's port 53 is UDP
	ct := &fakeConntrack{entries: map[conntrack.Service][]netip.AddrPort{}, unanswered: map[conntrack.Service][]netip.AddrPort{}}
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := New(Config{Tracker: tr, Kernel: nft.NewFake(), Conntrack: ct, Clock: clk})
	// syncAndPass syncs, then syncs again when the pass that sync owes is due (the
	// loop's timer): a pass never runs right after the commit.
	syncAndPass := func(what string) {
		t.Helper()
		n := len(ct.families)
		if err := p.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if len(ct.families) != n {
			t.Fatalf("%s: the pass ran right after the commit, want it %v later", what, unansweredDelay)
		}
		clk.Step(unansweredDelay)
		if err := p.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	tr.OnServiceAdd(testService("web", "10.96.0.10", false, httpPort, dnsPort))
	tr.OnEndpointSliceAdd(testSlice("web", readyEP("pod1"), readyEP("pod2")))
	syncAndPass("the first sync")
	if !slices.Equal(ct.families, []uint8{unix.AF_INET}) {
		t.Fatalf("unanswered reconciles after the first sync: families %v, want one of AF_INET", ct.families)
	}

	ct.unanswered[web] = []netip.AddrPort{
		netip.AddrPortFrom(web.Addr, web.Port), // sent before the rules: untranslated
		pod("pod1", 80),                        // in flight to an endpoint that stays
		pod("pod2", 80),                        // to the endpoint about to go
	}
	ct.unanswered[podAddr] = []netip.AddrPort{pod("pod2", 80)}
	ct.unanswered[udpPort] = []netip.AddrPort{netip.AddrPortFrom(web.Addr, 53)}
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(ct.families) != 1 {
		t.Fatalf("a sync that changed nothing reconciled unanswered entries (%d times in all)", len(ct.families))
	}

	clk.Step(unansweredGap)
	tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod1")))
	syncAndPass("an endpoint removed")
	if got, want := ct.unanswered[web], []netip.AddrPort{pod("pod1", 80)}; !slices.Equal(got, want) {
		t.Errorf("unanswered entries towards %v: %v, want %v", web, got, want)
	}
	if len(ct.unanswered[podAddr]) != 1 || len(ct.unanswered[udpPort]) != 1 {
		t.Errorf("entries towards other addresses were deleted: %v", ct.unanswered)
	}

	clk.Step(unansweredGap) // past the least gap between passes
	p.RequestResync()
	ct.unanswered[web] = append(ct.unanswered[web], pod("pod3", 80))
	syncAndPass("a resync")
	if got, want := ct.unanswered[web], []netip.AddrPort{pod("pod1", 80)}; !slices.Equal(got, want) {
		t.Errorf("after a resync, unanswered entries towards %v: %v, want %v", web, got, want)
	}

	// Passes are at least unansweredGap apart, and ten times the last one's length
	// when that is longer.
	for _, tc := range []struct {
		took, early, late time.Duration
	}{
		{took: 10 * time.Millisecond, early: 500 * time.Millisecond, late: 600 * time.Millisecond},
		{took: 200 * time.Millisecond, early: 1500 * time.Millisecond, late: 600 * time.Millisecond},
	} {
		clk.Step(10 * unansweredGap)
		ct.took = func() { clk.Step(tc.took) }
		p.RequestResync()
		syncAndPass("a resync")
		n := len(ct.families)
		clk.Step(tc.early)
		p.RequestResync()
		if err := p.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if len(ct.families) != n {
			t.Errorf("a pass %v after one that took %v: want it deferred", tc.took+tc.early, tc.took)
		}
		// The deferred pass is owed: the next sync makes it, although it changes
		// nothing (Run syncs when it is due).
		clk.Step(tc.late)
		if err := p.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if len(ct.families) != n+1 {
			t.Errorf("a pass %v after one that took %v, owed by a deferred one: want it run", tc.took+tc.early+tc.late, tc.took)
		}
		clk.Step(10 * unansweredGap)
		if err := p.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if len(ct.families) != n+1 {
			t.Errorf("a sync that changed nothing, with no pass owed, dumped the table")
		}
	}
}
