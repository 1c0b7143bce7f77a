package proxy

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// TestKernelRepairsForeignChangesAtOnce: with a resync period of an hour, another
// program's change to our table (made on its own netlink socket, in the test's
// namespace) is repaired within 2 s, because the kernel's nftables notifications say
// so; our own transactions and other tables' changes ask for nothing.
func TestKernelRepairsForeignChangesAtOnce(t *testing.T) {
	e := newKenv(t)
	addWeb(e.tr, "web", "10.96.0.10", "pod1")
	m := NewMetrics(nil)
	p := watchingProxy(t, e, m)

	listing := func() string {
		out, err := e.w.Node.Run("nft", "list", "table", "ip", TableName)
		if err != nil {
			return "(no table: " + err.Error() + ")"
		}
		return nft.NormalizeListing(out)
	}
	serves := func(pods ...string) func() (bool, string) {
		return func() (bool, string) {
			body, err := e.client.Get("10.96.0.10:80", 500*time.Millisecond)
			return err == nil && slices.Contains(pods, body), fmt.Sprintf("answer %q, %v", body, err)
		}
	}
	poll.Eventually(t, 10*time.Second, "the Service", serves("pod1"))

	// Our own transactions are not foreign.
	e.tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod2")))
	p.Trigger()
	poll.Eventually(t, 10*time.Second, "the endpoint change", serves("pod2"))
	want := listing()
	// Nor is another table's change.
	e.w.Node.MustRun(t, "nft", "add table ip other; add chain ip other c; add rule ip other c counter; delete table ip other")
	time.Sleep(500 * time.Millisecond)
	if n := testutil.ToFloat64(m.ForeignChanges); n != 0 {
		t.Fatalf("%v foreign changes after our own transaction and another table's", n)
	}

	tb := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}
	changes := []struct {
		name string
		do   func(c *nftables.Conn)
		// quiet is how long after the last repair the change comes: a change
		// within a second of it is repaired when that second ends.
		quiet time.Duration
	}{
		{"table deleted", func(c *nftables.Conn) { c.DelTable(tb) }, time.Second},
		{"services chain flushed", func(c *nftables.Conn) {
			c.FlushChain(&nftables.Chain{Table: tb, Name: chainServices})
		}, time.Second},
		{"dispatch map flushed", func(c *nftables.Conn) {
			c.FlushSet(&nftables.Set{Table: tb, Name: mapServiceIPs})
		}, time.Second},
		// Additions are repaired too: the notifications name the part, and the
		// repair deletes what we do not render.
		{"chain added", func(c *nftables.Conn) {
			c.AddChain(&nftables.Chain{Table: tb, Name: "intruder"})
		}, time.Second},
		{"set added", func(c *nftables.Conn) {
			c.AddSet(&nftables.Set{Table: tb, Name: "intruder", KeyType: nftables.TypeIPAddr}, nil)
		}, time.Second},
		{"dispatch map element added", func(c *nftables.Conn) {
			s, err := c.GetSetByName(tb, mapServiceIPs)
			if err != nil {
				t.Fatal(err)
			}
			// 10.96.0.99 . tcp . 80 : drop.
			key := append(append([]byte{10, 96, 0, 99}, 6, 0, 0, 0), 0, 80, 0, 0)
			if err := c.SetAddElements(s, []nftables.SetElement{{Key: key, VerdictData: &expr.Verdict{Kind: expr.VerdictDrop}}}); err != nil {
				t.Fatal(err)
			}
		}, time.Second},
		{"table deleted right after the last repair", func(c *nftables.Conn) { c.DelTable(tb) }, 0},
	}
	for _, ch := range changes {
		time.Sleep(ch.quiet)
		other, err := nftables.New(nftables.WithNetNSFd(e.w.Node.Fd))
		if err != nil {
			t.Fatal(err)
		}
		ch.do(other)
		start := time.Now()
		if err := other.Flush(); err != nil {
			t.Fatalf("%s: %v", ch.name, err)
		}
		poll.Eventually(t, 2*time.Second, ch.name+": the table repaired", func() (bool, string) {
			got := listing()
			return got == want, got
		})
		took := time.Since(start)
		poll.Eventually(t, 2*time.Second, ch.name+": the Service", serves("pod2"))
		t.Logf("%s: repaired in %v", ch.name, took.Round(time.Millisecond))
	}
	if n := testutil.ToFloat64(m.ForeignChanges); n < float64(len(changes)) {
		t.Fatalf("%v foreign changes counted, want at least %d", n, len(changes))
	}
}

// readCountingKernel counts reads of our table (the anchor table's apart).
type readCountingKernel struct {
	nft.Kernel
	reads, anchorReads int
}

// CommittedGeneration passes on the generations a Netlink's commits report.
func (k *readCountingKernel) CommittedGeneration() (uint32, bool) {
	if n, ok := k.Kernel.(committedGenerations); ok {
		return n.CommittedGeneration()
	}
	return 0, false
}

func (k *readCountingKernel) Read(ctx context.Context, f nft.Family, table string) (*nft.View, error) {
	if table == AnchorTableName {
		k.anchorReads++
	} else {
		k.reads++
	}
	return k.Kernel.Read(ctx, f, table)
}

// TestKernelResyncWithoutDriftIsCheap measures what a repair request costs when
// nothing changed (after lost notifications, or a change another program undid):
// no other program committed, so the resync reads nothing back and sends nothing.
// Every other resync follows a change of ours, whose generation the sync takes
// from the commit's report (CommittedGeneration) rather than reading it: a wrong
// one would make the next resync read the table.
func TestKernelResyncWithoutDriftIsCheap(t *testing.T) {
	const services = 1000
	w := netnstest.NewWorld(t)
	k := &readCountingKernel{Kernel: &nft.Netlink{NetNSFd: w.Node.Fd}}
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	for i := range services {
		name := fmt.Sprintf("s%d", i)
		tr.OnServiceAdd(testService(name, fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), false, httpPort))
		tr.OnEndpointSliceAdd(testSlice(name, readyEP("pod1"), readyEP("pod2")))
	}
	// A clock that stands still: a resync is never deferred for the last read's
	// cost, so a read this test forbids cannot hide behind a deferral.
	p := New(Config{Tracker: tr, Kernel: k, Clock: clocktesting.NewFakeClock(time.Now())})
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	var took []time.Duration
	for i := range 20 {
		if i%2 == 1 {
			pod := []string{"pod3", "pod4"}[i/2%2]
			tr.OnEndpointSliceUpdate(nil, testSlice("s7", readyEP("pod1"), readyEP(pod)))
			if err := p.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		p.RequestResync()
		start := time.Now()
		if err := p.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	if k.reads != 1 || k.anchorReads != 1 {
		t.Fatalf("%d kernel reads (%d of the anchor table), want only the first sync's: nobody else committed", k.reads, k.anchorReads)
	}
	slices.Sort(took)
	t.Logf("resync without drift, %d Services: p50 %v, max %v", services, took[len(took)/2], took[len(took)-1])
}

// watchingProxy runs a proxy on e with a resync period of an hour, so that only
// the kernel's notifications (WatchForeignChanges, running beside it until the
// test ends) can repair its table in a test's time; m may be nil.
func watchingProxy(t *testing.T, e *kenv, m *Metrics) *Proxy {
	t.Helper()
	p := New(Config{Tracker: e.tr, Kernel: e.kernel, Metrics: m, Options: e.p.cfg.Options,
		SyncPeriod: time.Hour, MinSyncPeriod: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); p.WatchForeignChanges(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	runProxy(t, p)
	return p
}
