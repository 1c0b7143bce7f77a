package proxy

import (
	"fmt"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// TestSiblingCommitsAreNotDrift: a dual-stack node's two proxies commit to their
// own tables in one kernel; with a shared ledger a resync after the sibling's
// commits reads nothing, without one (or after another program's commit) it reads
// the table again.
func TestSiblingCommitsAreNotDrift(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ledger    *CommitLedger
		wantReads [2]int // per proxy, after the steps below
	}{
		{name: "shared ledger", ledger: &CommitLedger{}, wantReads: [2]int{2, 2}},
		{name: "no ledger", ledger: nil, wantReads: [2]int{5, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := nft.NewFake()
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			var ks [2]*readCounter
			var trs [2]*endpoints.Tracker
			var ps [2]*Proxy
			for i, fam := range []endpoints.Family{endpoints.IPv4, endpoints.IPv6} {
				ks[i] = &readCounter{Fake: fake}
				trs[i] = endpoints.NewTracker(endpoints.TrackerOptions{Family: fam})
				ps[i] = New(Config{Tracker: trs[i], Kernel: ks[i], Clock: clk, Ledger: tc.ledger, Options: Options{Family: fam}})
			}
			addWeb(trs[0], "web", "10.96.0.10", "pod1")
			trs[1].OnServiceAdd(testService6("web6", "fd00:10:96::10", false, httpPort))
			trs[1].OnEndpointSliceAdd(testSlice6("web6", nil, "pod1"))
			sync := func(i int, resync bool) {
				t.Helper()
				clk.Step(time.Hour) // past any drift-check deferral
				if resync {
					ps[i].RequestResync()
				}
				if err := ps[i].Sync(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			// As the informers do: every tracker sees every slice and keeps its family's.
			update := func(s *discoveryv1.EndpointSlice) {
				for _, tr := range trs {
					tr.OnEndpointSliceUpdate(nil, s)
				}
			}
			sync(0, false) // first syncs read
			sync(1, false)
			for round := 0; round < 3; round++ {
				// Each proxy commits a change, then each resyncs after the other's commit.
				eps := []epSpec{readyEP("pod1")}
				if round%2 == 0 {
					eps = append(eps, readyEP("pod2"))
				}
				update(testSlice("web", eps...))
				sync(0, false)
				update(testSlice6("web6", nil, "pod1", "pod2"))
				sync(1, false)
				sync(0, false) // the IPv6 slice only: nothing to commit
				moved := testSlice("web", eps...)
				for j := range moved.Endpoints {
					moved.Endpoints[j].NodeName = ptr.To(fmt.Sprintf("node-%d", round))
				}
				update(moved)
				sync(0, false) // a change that renders the same rules: no commit, still verified
				sync(0, true)
				sync(1, true)
				if round == 0 && tc.ledger != nil && (ks[0].reads != 1 || ks[1].reads != 1) {
					t.Fatalf("round 0: reads %d, %d; want 1, 1 (sibling commits are not drift)", ks[0].reads, ks[1].reads)
				}
				update(testSlice6("web6", nil, "pod1"))
				sync(1, false)
			}
			fake.ForeignCommit() // another program: both read again
			sync(0, true)
			sync(1, true)
			if got := [2]int{ks[0].reads, ks[1].reads}; got != tc.wantReads {
				t.Fatalf("kernel reads per proxy = %v, want %v", got, tc.wantReads)
			}
		})
	}
}

func TestLedgerAccounts(t *testing.T) {
	l := &CommitLedger{}
	l.record(10, 12)
	l.record(12, 13) // adjacent: merged
	l.record(15, 16)
	for _, tc := range []struct {
		from, to uint32
		want     bool
	}{
		{10, 10, true},
		{10, 13, true},
		{11, 13, true},
		{10, 14, false}, // 14 is nobody's we know
		{13, 16, false},
		{15, 16, true},
		{9, 12, false},
	} {
		if got := l.accounts(tc.from, tc.to); got != tc.want {
			t.Errorf("accounts(%d, %d) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
	var none *CommitLedger
	if none.accounts(3, 4) || !none.accounts(4, 4) {
		t.Error("a nil ledger accounts only for no commits")
	}
}
