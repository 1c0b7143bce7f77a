package proxy

import (
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// TestKernelServiceCIDRDrops: in a world whose default route leads to a namespace
// that owns 10.96.200.1, an address of the service CIDR 10.96.0.0/16 that no
// Service holds (the leak an unallocated ClusterIP has without the drop: its
// packets follow the default route, and there it answers). Once the CIDR is known,
// a new connection to it from a pod (forward hook) and from the node (output hook)
// gets no answer, while in the same CIDR the Service web still answers and the
// Service empty (no endpoints) is still refused at once. A Service then created on
// 10.96.200.1 is served, and removing the CIDRs restores the leak: the drop, not
// something else, stopped it. The kernel's listing equals the render throughout.
func TestKernelServiceCIDRDrops(t *testing.T) {
	w := netnstest.NewWorld(t)
	// First: the node's default route points at it (World.AddPod).
	netnstest.StartEcho(t, w.AddPod("leak", "10.96.200.1"), "leak")
	client := w.AddPod("client", "10.244.2.9")
	netnstest.StartEcho(t, w.AddPod("pod1", podIPs["pod1"]), "pod1")
	netnstest.StartEcho(t, w.AddPod("pod2", podIPs["pod2"]), "pod2")
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	p := New(Config{Tracker: tr, Kernel: &nft.Netlink{NetNSFd: w.Node.Fd}, Options: Options{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")}})
	sync := func() {
		t.Helper()
		if err := p.Sync(t.Context()); err != nil {
			t.Fatalf("sync: %v", err)
		}
		if got, want := nft.NormalizeListing(w.Node.MustRun(t, "nft", "list", "table", "ip", TableName)), p.Desired().Text(); got != want {
			t.Fatalf("kernel listing differs from render\n--- kernel\n%s\n--- render\n%s", got, want)
		}
	}
	from := map[string]*netnstest.NS{"a pod": client, "the node": w.Node}
	answers := func(when, addr, want string) {
		t.Helper()
		for name, ns := range from {
			if got, err := ns.Get(addr, 2*time.Second); err != nil || got != want {
				t.Fatalf("%s: %s from %s: %q, %v; want %s to answer", when, addr, name, got, err, want)
			}
		}
	}
	const unallocated = "10.96.200.1:80"

	tr.OnServiceAdd(testService("web", "10.96.0.10", false, httpPort))
	tr.OnEndpointSliceAdd(testSlice("web", readyEP("pod1")))
	tr.OnServiceAdd(testService("empty", "10.96.0.11", false, httpPort))
	sync()
	answers("no service CIDRs known", unallocated, "leak")

	p.SetServiceCIDRs([]netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:10:96::/112")})
	sync()
	listing := w.Node.MustRun(t, "nft", "list", "table", "ip", TableName)
	if !strings.Contains(listing, "ip daddr 10.96.0.0/16 drop") || strings.Contains(listing, "fd00:10:96::/112") {
		t.Fatalf("the ip table should drop 10.96.0.0/16 and know nothing of the IPv6 CIDR:\n%s", listing)
	}
	const wait = time.Second
	for name, ns := range from {
		start := time.Now()
		c, err := ns.Dial("tcp", unallocated, wait)
		took := time.Since(start)
		if err == nil {
			c.Close()
			t.Fatalf("%s reached the unallocated %s through the CIDR drop", name, unallocated)
		}
		// Dropped, as kube-proxy drops: no reset, no ICMP error, the dial runs
		// out its time. (A refusal would say the address exists.)
		if !isTimeout(err) {
			t.Errorf("dial %s from %s: %v after %v, want a timeout (dropped)", unallocated, name, err, took)
		}
		t.Logf("dial %s from %s: %v after %v", unallocated, name, err, took.Round(time.Millisecond))
	}
	answers("CIDR known, Service with endpoints", "10.96.0.10:80", "pod1")
	for name, ns := range from {
		start := time.Now()
		_, err := ns.Dial("tcp", "10.96.0.11:80", wait)
		if !errors.Is(err, syscall.ECONNREFUSED) || time.Since(start) > 500*time.Millisecond {
			t.Errorf("Service without endpoints from %s: %v after %v, want refused at once (its reject comes before the drop)", name, err, time.Since(start))
		}
	}

	tr.OnServiceAdd(testService("late", "10.96.200.1", false, httpPort))
	tr.OnEndpointSliceAdd(testSlice("late", readyEP("pod2")))
	sync()
	answers("a Service on the address", unallocated, "pod2")

	tr.OnServiceDelete(testService("late", "10.96.200.1", false))
	p.SetServiceCIDRs(nil)
	sync()
	if listing := w.Node.MustRun(t, "nft", "list", "table", "ip", TableName); strings.Contains(listing, chainServiceCIDRs) {
		t.Fatalf("no CIDRs, yet the table has %s:\n%s", chainServiceCIDRs, listing)
	}
	answers("CIDRs gone", unallocated, "leak")
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}
