package proxy

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// forgery replaces rule index of chain with a rule of other expressions that
// carries the original's user data (its Rule.Hash and comment): a drift check that
// trusts user data sees the rule it wrote.
type forgery struct {
	name  string
	chain string
	index int
	exprs []expr.Any
}

// forgeries break every Service: a drop where the load-balancing DNAT was, an
// accept (no DNAT) where the dispatch to Services was, a drop where nat
// prerouting jumps to it.
var forgeries = []forgery{
	{"drop in the lb chain", "lb-1-10", 0, []expr.Any{&expr.Verdict{Kind: expr.VerdictDrop}}},
	{"accept at the top of services", chainServices, 0, []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}}},
	{"drop in nat prerouting", chainPrerouting, 0, []expr.Any{&expr.Verdict{Kind: expr.VerdictDrop}}},
}

// forge applies f in ns on a netlink socket of its own, as another program would.
func forge(t *testing.T, ns *netnstest.NS, f forgery) {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(ns.Fd))
	if err != nil {
		t.Fatal(err)
	}
	queueForgery(t, c, f)
	if err := c.Flush(); err != nil {
		t.Fatalf("%s: replace rule: %v", f.name, err)
	}
}

// queueForgery reads the rule f replaces and queues its replacement on c, for
// the caller to commit (c.Flush): TestKernelRepairTime times the commit alone.
func queueForgery(t *testing.T, c *nftables.Conn, f forgery) {
	t.Helper()
	tb := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}
	ch := &nftables.Chain{Table: tb, Name: f.chain}
	rules, err := c.GetRules(tb, ch)
	if err != nil {
		t.Fatalf("%s: get rules of %s: %v", f.name, f.chain, err)
	}
	if len(rules) <= f.index {
		t.Fatalf("%s: chain %s has %d rules", f.name, f.chain, len(rules))
	}
	orig := rules[f.index]
	c.ReplaceRule(&nftables.Rule{Table: tb, Chain: ch, Handle: orig.Handle, Exprs: f.exprs, UserData: orig.UserData})
}

// broken asserts that the web Service at 10.96.0.10 does not answer: the forgery
// took effect.
func (e *kenv) broken(t *testing.T, f forgery) {
	t.Helper()
	if body, err := e.client.Get("10.96.0.10:80", 300*time.Millisecond); err == nil {
		t.Fatalf("%s: the Service still answers (%q): the forgery did nothing", f.name, body)
	}
}

// repaired asserts that the Service answers again and the kernel holds exactly
// the desired table.
func (e *kenv) repaired(t *testing.T, f forgery, p *Proxy, when string) {
	t.Helper()
	if body, err := e.client.Get("10.96.0.10:80", 2*time.Second); err != nil || body != "pod1" {
		t.Fatalf("%s, %s: the Service answers %q, %v", f.name, when, body, err)
	}
	if got := nft.NormalizeListing(e.w.Node.MustRun(t, "nft", "list", "table", "ip", TableName)); got != p.Desired().Text() {
		t.Fatalf("%s, %s: the kernel differs from desired:\n%s", f.name, when, got)
	}
}

// TestKernelForgedRulesAreRepaired: a rule replaced by another that carries
// svcproxy's own user data is repaired by the next resync, and by a restarted
// svcproxy adopting the table: the drift check compares what rules do, not what
// their user data claims.
func TestKernelForgedRulesAreRepaired(t *testing.T) {
	for _, f := range forgeries {
		t.Run(f.name+"/resync", func(t *testing.T) {
			e := newKenv(t)
			addWeb(e.tr, "web", "10.96.0.10", "pod1")
			e.sync(t)
			e.repaired(t, f, e.p, "before")
			for i := range 2 { // the view recorded after a repair is checked again
				forge(t, e.w.Node, f)
				e.broken(t, f)
				e.p.RequestResync() // what the --sync-period timer does
				e.sync(t)
				e.repaired(t, f, e.p, fmt.Sprintf("after resync %d", i+1))
			}
		})
		t.Run(f.name+"/restart", func(t *testing.T) {
			e := newKenv(t)
			addWeb(e.tr, "web", "10.96.0.10", "pod1")
			e.sync(t)
			forge(t, e.w.Node, f)
			e.broken(t, f)
			tr := endpoints.NewTracker(endpoints.TrackerOptions{})
			addWeb(tr, "web", "10.96.0.10", "pod1")
			p2 := New(Config{Tracker: tr, Kernel: e.kernel, Options: e.p.cfg.Options})
			if err := p2.Sync(t.Context()); err != nil {
				t.Fatalf("first sync of a restarted proxy: %v", err)
			}
			e.repaired(t, f, p2, "after a restart")
		})
	}
}

// TestKernelForgedRulesAreRepairedAtOnce: a running svcproxy with an hour's resync
// period repairs each forgery within 2 s, woken by the kernel's notification of
// another program's commit.
func TestKernelForgedRulesAreRepairedAtOnce(t *testing.T) {
	e := newKenv(t)
	addWeb(e.tr, "web", "10.96.0.10", "pod1")
	watchingProxy(t, e, nil)
	serves := func() (bool, string) {
		body, err := e.client.Get("10.96.0.10:80", 300*time.Millisecond)
		return err == nil && body == "pod1", fmt.Sprintf("answer %q, %v", body, err)
	}
	poll.Eventually(t, 10*time.Second, "the Service", serves)
	for _, f := range forgeries {
		time.Sleep(minRepairInterval) // each forgery after the last repair's interval
		start := time.Now()
		forge(t, e.w.Node, f)
		poll.Eventually(t, 2*time.Second, f.name+": repaired", serves)
		t.Logf("%s: repaired in %v", f.name, time.Since(start).Round(time.Millisecond))
	}
}

// TestKernelRereadOfAnUnchangedTableWritesNothing: after another program's commit
// elsewhere (the generation moved, so the resync reads the table back) and after a
// restart, comparing the content of every rule of a table with every kind of
// Service finds nothing to write.
func TestKernelRereadOfAnUnchangedTableWritesNothing(t *testing.T) {
	e := newKenv(t)
	services := func(tr *endpoints.Tracker) {
		tr.OnServiceAdd(testService("web", "10.96.0.10", false, httpPort, dnsPort))
		tr.OnServiceAdd(testService("sticky", "10.96.0.11", true, httpPort, dnsPort))
		tr.OnServiceAdd(testService("empty", "10.96.0.12", false, httpPort, dnsPort))
		np := testService("np", "10.96.0.13", false, httpPort)
		np.Spec.Type, np.Spec.Ports[0].NodePort = "NodePort", 30080
		np.Spec.ExternalIPs = []string{"192.0.2.10"}
		tr.OnServiceAdd(np)
		tr.OnEndpointSliceAdd(testSlice("web", readyEP("pod1"), readyEP("pod2")))
		tr.OnEndpointSliceAdd(testSlice("sticky", readyEP("pod1"), readyEP("pod3")))
		tr.OnEndpointSliceAdd(testSlice("np", readyEP("pod2")))
	}
	counting := &countingKernel{Kernel: e.kernel}
	reads := &readCountingKernel{Kernel: counting}
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	services(tr)
	// A clock that stands still: the proxy defers a whole read until ten times the
	// last one's duration has passed, which on a loaded machine deferred the
	// resync's read this test is about.
	clk := clocktesting.NewFakeClock(time.Now())
	p := New(Config{Tracker: tr, Kernel: reads, Clock: clk, Options: e.p.cfg.Options})
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	counting.objects = 0
	e.w.Node.MustRun(t, "nft", "add table ip other") // another program's commit
	p.RequestResync()
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if reads.reads != 2 {
		t.Fatalf("%d reads, want 2: the resync after a foreign commit reads the table", reads.reads)
	}
	if counting.objects != 0 {
		t.Fatalf("the resync rewrote %d objects of an unchanged table", counting.objects)
	}
	tr2 := endpoints.NewTracker(endpoints.TrackerOptions{})
	services(tr2)
	p2 := New(Config{Tracker: tr2, Kernel: counting, Options: e.p.cfg.Options})
	if err := p2.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if counting.objects != 0 {
		t.Fatalf("a restart rewrote %d objects of an unchanged table", counting.objects)
	}
}
