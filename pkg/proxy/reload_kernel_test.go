package proxy

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// An operator can save the table with `nft list table ip svcproxy` and load it back
// with `nft -f` (nft 1.0.6 here): traffic flows through the reloaded table, and a
// svcproxy started on it adopts it without ever removing a Service's dispatch
// element. A ClientIP-affinity client keeps its endpoint throughout: the affinity
// map's entries are part of the listing.
func TestKernelListingLoadsBackWithNft(t *testing.T) {
	e := newKenv(t)
	services := func(tr *endpoints.Tracker) {
		tr.OnServiceAdd(testService("web", "10.96.0.10", false, httpPort, dnsPort))
		tr.OnServiceAdd(testService("three", "10.96.0.26", false, httpPort))
		tr.OnServiceAdd(testService("empty", "10.96.0.12", false, httpPort, dnsPort))
		tr.OnServiceAdd(testService("sticky", "10.96.0.11", true, httpPort, dnsPort))
		tr.OnEndpointSliceAdd(testSlice("web", readyEP("pod1"), readyEP("pod2")))
		tr.OnEndpointSliceAdd(testSlice("three", readyEP("pod1"), readyEP("pod2"), readyEP("pod3")))
		tr.OnEndpointSliceAdd(testSlice("sticky", readyEP("pod1"), readyEP("pod2"), readyEP("pod3")))
	}
	services(e.tr)
	e.sync(t)
	stuck := e.who(t, "10.96.0.11:80", 5)
	if len(stuck) != 1 {
		t.Fatalf("sticky Service answered from %v, want one endpoint", stuck)
	}
	listing := e.w.Node.MustRun(t, "nft", "list", "table", "ip", TableName)
	file := filepath.Join(t.TempDir(), "svcproxy.nft")
	if err := os.WriteFile(file, []byte(listing), 0o644); err != nil {
		t.Fatal(err)
	}
	e.w.Node.MustRun(t, "nft", "delete", "table", "ip", TableName)
	if out, err := e.w.Node.Run("nft", "-f", file); err != nil {
		t.Fatalf("nft -f of the listing: %v\n%s\n--- listing\n%s", err, out, listing)
	}
	// A fixed point: what nft made of the listing lists the same (a listing that
	// loads once but not twice, e.g. "ct protocol tcp" dropped as a dependency of
	// "tcp dport", would break the operator's second save and load).
	if again := e.w.Node.MustRun(t, "nft", "list", "table", "ip", TableName); nft.NormalizeListing(again) != nft.NormalizeListing(listing) {
		t.Fatalf("the reloaded table lists differently\n--- first\n%s\n--- after nft -f\n%s", listing, again)
	}
	check := func(when string) {
		t.Helper()
		if got := e.who(t, "10.96.0.10:80", 30); len(got) != 2 {
			t.Fatalf("%s: web answered from %v, want pod1 and pod2", when, got)
		}
		if got := e.who(t, "10.96.0.26:80", 60); len(got) != 3 {
			t.Fatalf("%s: three answered from %v, want pod1..3", when, got)
		}
		if _, err := e.client.Get("10.96.0.12:80", time.Second); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("%s: Service without endpoints: %v, want connection refused", when, err)
		}
		if got := e.who(t, "10.96.0.11:80", 10); !maps.Equal(got, map[string]int{firstKey(stuck): 10}) {
			t.Fatalf("%s: the sticky client stuck to %v before, now answers came from %v", when, stuck, got)
		}
	}
	check("after nft -f")

	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	services(tr)
	rec := &recordingKernel{Kernel: e.kernel}
	p2 := New(Config{Tracker: tr, Kernel: rec, Options: e.p.cfg.Options})
	if err := p2.Sync(t.Context()); err != nil {
		t.Fatalf("svcproxy on the reloaded table: %v", err)
	}
	for _, tx := range rec.txs {
		if tx.Recreate {
			t.Fatal("svcproxy recreated the reloaded table instead of adopting it")
		}
		for _, el := range tx.DelElements {
			if el.Set == mapServiceIPs {
				t.Fatalf("svcproxy removed dispatch element %v while adopting", el)
			}
		}
		// nft -f drops the rule hashes svcproxy keeps in rules' user data, so
		// adoption rewrites the rules of every chain; nothing else.
		if n := len(tx.AddSets) + len(tx.DelSets) + len(tx.Added()) + len(tx.DelElements) + len(tx.NewChains) + len(tx.DelChains); n != 0 {
			t.Fatalf("adoption changed %d sets, elements or chains besides rewriting rules", n)
		}
	}
	got := nft.NormalizeListing(e.w.Node.MustRun(t, "nft", "list", "table", "ip", TableName))
	if want := p2.Desired().Text(); got != want {
		t.Fatalf("after adoption the kernel differs from render\n--- kernel\n%s\n--- render\n%s", got, want)
	}
	check("after adoption")
	rec.txs = nil
	p2.RequestResync()
	if err := p2.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, tx := range rec.txs {
		if !tx.Empty() {
			t.Fatalf("a resync after adoption still changes %d objects", tx.Size())
		}
	}
}

func firstKey(m map[string]int) string {
	for k := range m {
		return k
	}
	return ""
}
