package conntrack

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/poll"
)

// kworld6 is an IPv6 node: a client and two echo pods, each on a /64 of its own
// veth to the node, which forwards and DNATs with an `ip6` table.
type kworld6 struct {
	node, client *netnstest.NS
	c            *Cleaner
}

var (
	pod1v6 = netip.MustParseAddrPort("[fd00:2::2]:53")
	pod2v6 = netip.MustParseAddrPort("[fd00:3::2]:53")
)

func newKworld6(t *testing.T) *kworld6 {
	t.Helper()
	node := netnstest.New(t, "node6")
	// default: the veths created below forward too (all only changes existing links).
	// No duplicate address detection: links are usable at once, link-local
	// addresses (the source of neighbour discovery) included.
	node.MustRun(t, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1", "net.ipv6.conf.default.forwarding=1", "net.ipv6.conf.default.accept_dad=0")
	attach := func(name string, subnet int) *netnstest.NS {
		ns := netnstest.New(t, name)
		ns.MustRun(t, "sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0")
		host := fmt.Sprintf("v6h%d-%d", os.Getpid()%100000, subnet)
		node.MustRun(t, "ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns.Name)
		node.MustRun(t, "ip", "-6", "addr", "add", fmt.Sprintf("fd00:%d::1/64", subnet), "dev", host, "nodad")
		node.MustRun(t, "ip", "link", "set", host, "up")
		ns.MustRun(t, "ip", "-6", "addr", "add", fmt.Sprintf("fd00:%d::2/64", subnet), "dev", "eth0", "nodad")
		ns.MustRun(t, "ip", "link", "set", "eth0", "up")
		ns.MustRun(t, "ip", "-6", "route", "add", "default", "via", fmt.Sprintf("fd00:%d::1", subnet), "dev", "eth0")
		return ns
	}
	k := &kworld6{node: node, client: attach("client6", 1)}
	netnstest.StartEcho(t, attach("pod1v6", 2), "pod1")
	netnstest.StartEcho(t, attach("pod2v6", 3), "pod2")
	k.c = newCleaner(t, node)
	// Neighbour discovery done before the test's flows: their first datagram
	// must not be the one lost while the node resolves the pod.
	for i, pod := range []netip.AddrPort{pod1v6, pod2v6} {
		c := k.flow(t, 40900+i, pod)
		poll.Eventually(t, 10*time.Second, "a direct answer from "+pod.String(), func() (bool, string) {
			got := who(t, c, 200*time.Millisecond)
			return got != "", "no answer"
		})
	}
	return k
}

// dnat replaces the node's ip6 rules by one DNAT per Service address (UDP).
func (k *kworld6) dnat(t *testing.T, rules map[netip.AddrPort]netip.AddrPort) {
	t.Helper()
	var b strings.Builder
	b.WriteString("table ip6 svcproxy {}\ndelete table ip6 svcproxy\ntable ip6 svcproxy {\n chain pre {\n  type nat hook prerouting priority dstnat; policy accept;\n  ct state invalid drop\n")
	for svc, ep := range rules {
		fmt.Fprintf(&b, "  ip6 daddr %s udp dport %d dnat to %s\n", svc.Addr(), svc.Port(), ep)
	}
	b.WriteString(" }\n}\n")
	cmd := k.node.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft -f: %v: %s\n%s", err, out, b.String())
	}
}

func (k *kworld6) flow(t *testing.T, sport int, dst netip.AddrPort) net.Conn {
	t.Helper()
	c, err := k.client.DialFrom("udp", fmt.Sprintf("[::]:%d", sport), dst.String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestKernelReconcileUDPv6: a real IPv6 UDP flow pinned by its conntrack entry
// to an endpoint that no longer serves moves to the new one once Reconcile has
// deleted the entry (dumped with AF_INET6, deleted with IPv6 tuples); a flow to
// a serving endpoint stays.
func TestKernelReconcileUDPv6(t *testing.T) {
	k := newKworld6(t)
	svc := netip.MustParseAddrPort("[fd00:96::10]:53")
	kept := netip.MustParseAddrPort("[fd00:96::20]:53")

	k.dnat(t, map[netip.AddrPort]netip.AddrPort{svc: pod1v6, kept: pod1v6})
	c := k.flow(t, 40100, svc)
	stay := k.flow(t, 40101, kept)
	for _, conn := range []net.Conn{c, stay} {
		if got := who(t, conn, time.Second); got != "pod1" {
			t.Fatalf("first answer on %s: %q, want pod1", conn.RemoteAddr(), got)
		}
	}
	entries, _, err := k.c.list(unix.AF_INET6, unix.IPPROTO_UDP)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range entries {
		if e.OrigDst == svc {
			found = e.ReplySrc == pod1v6 && e.Family == unix.AF_INET6
		}
	}
	if !found {
		t.Fatalf("no AF_INET6 entry %s -> %s among %+v", svc, pod1v6, entries)
	}

	k.dnat(t, map[netip.AddrPort]netip.AddrPort{svc: pod2v6, kept: pod1v6})
	if got := who(t, c, time.Second); got != "pod1" {
		t.Fatalf("before Reconcile the flow reached %q: the entry did not pin it, the test proves nothing", got)
	}
	n, err := k.c.Reconcile(Serving{udpSvc(svc): {pod2v6}, udpSvc(kept): {pod1v6}})
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if n != 1 {
		t.Fatalf("Reconcile deleted %d entries, want 1", n)
	}
	if got := who(t, c, time.Second); got != "pod2" {
		t.Fatalf("after Reconcile the flow reached %q, want pod2", got)
	}
	if got := who(t, stay, time.Second); got != "pod1" {
		t.Fatalf("the flow to a serving endpoint moved to %q", got)
	}
}
