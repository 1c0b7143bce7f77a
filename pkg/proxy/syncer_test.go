package proxy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// route traces a new TCP connection from a pod to clusterIP:80 through what the fake
// kernel holds and returns where it can go.
func route(t *testing.T, k *nft.Fake, clusterIP string) string {
	t.Helper()
	return traceText(t, k, nft.Packet{Src: client, Dst: netip.MustParseAddr(clusterIP), Proto: nft.ProtoTCP, DPort: 80})
}

// traceText traces pkt through what the fake kernel's IPv4 table holds and returns
// where it can go.
func traceText(t *testing.T, k *nft.Fake, pkt nft.Packet) string {
	t.Helper()
	out, err := nft.Trace(k.Ruleset(nft.FamilyIPv4, TableName), pkt, nil)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, o := range out {
		parts = append(parts, o.String())
	}
	return strings.Join(parts, ", ")
}

func addWeb(tr *endpoints.Tracker, name, ip string, pods ...string) {
	tr.OnServiceAdd(testService(name, ip, false, httpPort))
	var eps []epSpec
	for _, p := range pods {
		eps = append(eps, readyEP(p))
	}
	tr.OnEndpointSliceAdd(testSlice(name, eps...))
}

func TestSyncFailureChangesNothingAndIsRetried(t *testing.T) {
	k := nft.NewFake()
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	m := NewMetrics(nil)
	p := New(Config{Tracker: tr, Kernel: k, Metrics: m})
	addWeb(tr, "web", "10.96.0.10", "pod1")
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := route(t, k, "10.96.0.10"); got != "dnat 10.244.1.2:80" {
		t.Fatalf("before: %s", got)
	}
	tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod2")))
	k.FailNext = 3 // the batch, then each of its owners (the Service, the hairpin chain: pod2 is in another shard) alone
	if err := p.Sync(t.Context()); err == nil {
		t.Fatal("sync succeeded although the kernel refused")
	}
	if got := route(t, k, "10.96.0.10"); got != "dnat 10.244.1.2:80" {
		t.Fatalf("a refused transaction changed the kernel: %s", got)
	}
	if got := testutil.ToFloat64(m.SyncFailures); got != 1 {
		t.Fatalf("sync failures metric = %v, want 1", got)
	}
	if err := p.Sync(t.Context()); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if got := route(t, k, "10.96.0.10"); got != "dnat 10.244.1.3:80" {
		t.Fatalf("retry did not program the new endpoint: %s", got)
	}
}

func TestSyncIsolatesAServiceTheKernelRefuses(t *testing.T) {
	k := nft.NewFake()
	refusing := refuseService(k, "ns/bad")
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	m := NewMetrics(nil)
	p := New(Config{Tracker: tr, Kernel: k, Metrics: m})
	addWeb(tr, "good1", "10.96.0.10", "pod1")
	addWeb(tr, "bad", "10.96.0.11", "pod2")
	addWeb(tr, "good2", "10.96.0.12", "pod3")
	err := p.Sync(t.Context())
	if err == nil || !strings.Contains(err.Error(), "svc:ns/bad") {
		t.Fatalf("sync error %v, want one naming the refused Service", err)
	}
	if got := route(t, k, "10.96.0.10") + " / " + route(t, k, "10.96.0.12"); got != "dnat 10.244.1.2:80 / dnat 10.244.1.4:80" {
		t.Fatalf("good Services held back by the refused one: %s", got)
	}
	if got := route(t, k, "10.96.0.11"); got != "accept" {
		t.Fatalf("the refused Service is in the kernel: %s", got)
	}
	if got := testutil.ToFloat64(m.RefusedChanges); got != 1 {
		t.Fatalf("refused changes metric = %v, want 1", got)
	}
	// Traffic to good Services still flows by the kernel's own state.
	kv, _ := k.Read(t.Context(), nft.FamilyIPv4, TableName)
	full := nft.PlanFull(p.desired, kv)
	if owners := full.Owners(); len(owners) != 1 || owners[0] != "svc:ns/bad" {
		t.Fatalf("kernel differs from desired in more than the refused Service: %v", owners)
	}
	p.desired.Requeue(full) // planning took the pending changes; give them back
	*refusing = false
	if err := p.Sync(t.Context()); err != nil {
		t.Fatalf("sync after the kernel accepts again: %v", err)
	}
	if got := route(t, k, "10.96.0.11"); got != "dnat 10.244.1.3:80" {
		t.Fatalf("the once-refused Service was not retried: %s", got)
	}
}

// runProxy runs the loop until stop is called or the test ends.
func runProxy(t *testing.T, p *Proxy) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = p.Run(ctx, nil) }()
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return stop
}

func TestRunProgramsChangesAndCoalescesBursts(t *testing.T) {
	k := nft.NewFake()
	var p *Proxy
	tr := endpoints.NewTracker(endpoints.TrackerOptions{OnChange: func() { p.Trigger() }})
	p = New(Config{Tracker: tr, Kernel: k, MinSyncPeriod: 300 * time.Millisecond})
	runProxy(t, p)
	poll.Eventually(t, 10*time.Second, "the first sync", func() (bool, string) {
		return k.Applied() == 2, fmt.Sprintf("%d transactions (the anchor table's and ours)", k.Applied())
	})
	for i, name := range []string{"a", "b", "c", "d", "e"} {
		addWeb(tr, name, "10.96.0."+string(rune('1'+i)), "pod1")
	}
	poll.Eventually(t, 10*time.Second, "all five Services", func() (bool, string) {
		got := route(t, k, "10.96.0.5")
		return got == "dnat 10.244.1.2:80", "10.96.0.5: " + got
	})
	if n := k.Applied() - 2; n > 2 {
		t.Fatalf("a burst of 5 changes took %d transactions, want them coalesced", n)
	}
}

func TestRunRetriesAndRepairsDrift(t *testing.T) {
	k := nft.NewFake()
	k.FailNext = 2
	var p *Proxy
	tr := endpoints.NewTracker(endpoints.TrackerOptions{OnChange: func() { p.Trigger() }})
	m := NewMetrics(nil)
	p = New(Config{Tracker: tr, Kernel: k, Metrics: m, SyncPeriod: 50 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	addWeb(tr, "web", "10.96.0.10", "pod1")
	stop := runProxy(t, p)
	has := func() (bool, string) {
		got := route(t, k, "10.96.0.10")
		return got == "dnat 10.244.1.2:80", "10.96.0.10: " + got
	}
	poll.Eventually(t, 10*time.Second, "the Service after two refused transactions", has)
	if got := testutil.ToFloat64(m.SyncFailures); got < 1 {
		t.Fatalf("sync failures = %v, want the refused transactions counted", got)
	}
	k.Tamper(nft.FamilyIPv4, TableName, "lb-1-10")
	poll.Eventually(t, 10*time.Second, "the periodic resync to restore the deleted chain", has)
	stop()
	kv, _ := k.Read(t.Context(), nft.FamilyIPv4, TableName)
	if tx := nft.PlanFull(p.Desired(), kv); !tx.Empty() {
		t.Fatalf("kernel and desired differ after retries and repair: %v", tx.Owners())
	}
}

func TestResyncReadsTheKernelOnlyWhenSomethingCommitted(t *testing.T) {
	k, tr, clk, p := readCountingProxy()
	steps := []struct {
		name      string
		before    func()
		wantReads int
	}{
		{"first sync reads", func() {}, 1},
		{"resync after only our own commits: skipped", func() { p.RequestResync() }, 1},
		{"an incremental change then a resync: still skipped", func() {
			tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod2")))
			if err := p.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			p.RequestResync()
		}, 1},
		{"another program committed: resync reads", func() { k.ForeignCommit(); p.RequestResync() }, 2},
		{"someone deleted our chain: resync reads and repairs", func() {
			k.Tamper(nft.FamilyIPv4, TableName, "lb-1-10")
			p.RequestResync()
		}, 3},
	}
	for _, st := range steps {
		clk.Step(time.Hour) // well past any drift-check deferral
		st.before()
		if err := p.Sync(t.Context()); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if k.reads != st.wantReads {
			t.Fatalf("%s: %d kernel reads, want %d", st.name, k.reads, st.wantReads)
		}
	}
	if got := route(t, k.Fake, "10.96.0.10"); got != "dnat 10.244.1.3:80" {
		t.Fatalf("tampered chain not repaired: %s", got)
	}
}

// readCountingProxy is a proxy on a readCounter and a fake clock, serving web.
func readCountingProxy() (*readCounter, *endpoints.Tracker, *clocktesting.FakeClock, *Proxy) {
	k := &readCounter{Fake: nft.NewFake()}
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := New(Config{Tracker: tr, Kernel: k, Clock: clk})
	addWeb(tr, "web", "10.96.0.10", "pod1")
	return k, tr, clk, p
}

// readCounter counts the reads of our table; the anchor table's (a few objects,
// see anchor.go) apart.
type readCounter struct {
	*nft.Fake
	reads, anchorReads int
	onRead             func()
}

func (r *readCounter) Read(ctx context.Context, f nft.Family, table string) (*nft.View, error) {
	if table == AnchorTableName {
		r.anchorReads++
		return r.Fake.Read(ctx, f, table)
	}
	r.reads++
	if r.onRead != nil {
		r.onRead()
	}
	return r.Fake.Read(ctx, f, table)
}

func TestSyncRecreatesATableOfAnOlderLayout(t *testing.T) {
	k := nft.NewFake()
	// An older svcproxy left a table whose hairpin set (of pod1's shard) had another key type.
	old := &nft.Tx{Family: nft.FamilyIPv4, Table: TableName, AddSets: []*nft.Set{{Name: "hairpin-02", Key: []nft.DataType{nft.TypeIPv4Addr}}},
		NewChains: []*nft.Chain{{Name: "svc-stale"}}, Chains: []*nft.Chain{{Name: "svc-stale"}}}
	if err := k.Apply(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	addWeb(tr, "web", "10.96.0.10", "pod1")
	p := New(Config{Tracker: tr, Kernel: k})
	if err := p.Sync(t.Context()); err != nil {
		t.Fatalf("sync over an incompatible table: %v", err)
	}
	if _, ok := k.Chain(nft.FamilyIPv4, TableName, "svc-stale"); ok {
		t.Fatal("the old table's chain survived the rebuild")
	}
	kv, _ := k.Read(t.Context(), nft.FamilyIPv4, TableName)
	if got := kv.Sets["hairpin-02"].Key; len(got) != 2 {
		t.Fatalf("hairpin set not rebuilt with the new key: %v", got)
	}
	if got := route(t, k, "10.96.0.10"); got != "dnat 10.244.1.2:80" {
		t.Fatalf("Service missing after the rebuild: %s", got)
	}
}

// TestSyncRecreatesATableAnotherProgramMadeIncompatible: the sync checks only
// the changed chains against the kernel's (nft.ChangesCompatible), so a chain
// another program turned into a base chain must reach that check through the
// resync that reads it back; the kernel cannot take our chain back in place.
func TestSyncRecreatesATableAnotherProgramMadeIncompatible(t *testing.T) {
	k := nft.NewFake()
	rec := &recordingKernel{Kernel: k}
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	addWeb(tr, "web", "10.96.0.10", "pod1")
	p := New(Config{Tracker: tr, Kernel: rec})
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	var victim string
	for _, name := range slices.Sorted(maps.Keys(k.Ruleset(nft.FamilyIPv4, TableName).Chains)) {
		if c, _ := k.Chain(nft.FamilyIPv4, TableName, name); c.Hook == nil {
			victim = name
			break
		}
	}
	hook := &nft.ChainHook{Type: "filter", Hook: "input", Priority: 0}
	if err := k.Apply(t.Context(), &nft.Tx{Family: nft.FamilyIPv4, Table: TableName,
		NewChains: []*nft.Chain{{Name: victim, Hook: hook}}, Chains: []*nft.Chain{{Name: victim, Hook: hook}}}); err != nil {
		t.Fatal(err)
	}
	k.ForeignCommit()
	tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod2"))) // a change that keeps the chains
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c, ok := k.Chain(nft.FamilyIPv4, TableName, victim); !ok || c.Hook == nil {
		t.Fatalf("the incremental sync touched chain %s, which it did not change", victim)
	}
	p.RequestResync()
	rec.txs = nil
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(rec.txs) != 1 || !rec.txs[0].Recreate {
		t.Fatalf("%d transactions after the resync read a hooked %s, want one recreating the table", len(rec.txs), victim)
	}
	if c, _ := k.Chain(nft.FamilyIPv4, TableName, victim); c.Hook != nil || len(c.Rules) == 0 {
		t.Fatalf("chain %s after the rebuild: hook %v, %d rules", victim, c.Hook, len(c.Rules))
	}
	if got := route(t, k, "10.96.0.10"); !strings.HasPrefix(got, "dnat ") {
		t.Fatalf("Service after the rebuild: %s", got)
	}
}

func TestDriftChecksAreDeferredWhenReadsAreSlow(t *testing.T) {
	k := &readCounter{Fake: nft.NewFake()}
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	k.onRead = func() { clk.Step(2 * time.Second) } // a big table takes 2 s to read
	p := New(Config{Tracker: tr, Kernel: k, Clock: clk})
	addWeb(tr, "web", "10.96.0.10", "pod1")
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	k.ForeignCommit()
	clk.Step(5 * time.Second)
	p.RequestResync()
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if k.reads != 1 {
		t.Fatalf("read again %d times 5 s after a 2 s read, want the check deferred", k.reads-1)
	}
	clk.Step(30 * time.Second)
	p.RequestResync()
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if k.reads != 2 {
		t.Fatalf("%d reads, want the deferred drift check done once its time came", k.reads)
	}
}

// refuseService makes k refuse every transaction that adds an element of Service
// svc (namespace/name), as a kernel refuses a bad object, until *refusing is false.
func refuseService(k *nft.Fake, svc string) (refusing *bool) {
	refusing = new(bool)
	*refusing = true
	k.Refuse = func(tx *nft.Tx) error {
		for _, e := range tx.Added() {
			if *refusing && strings.HasPrefix(e.Comment, svc+":") {
				return errors.New("fake: invalid argument")
			}
		}
		return nil
	}
	return refusing
}
