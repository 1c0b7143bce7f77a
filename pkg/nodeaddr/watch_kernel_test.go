package nodeaddr

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/poll"
)

// TestWatcherFollowsAddresses runs the watcher against a namespace of its own
// with a veth pair in it: the first selection holds what is there, an address
// added or removed later shows in a new selection, one outside the list never.
func TestWatcherFollowsAddresses(t *testing.T) {
	ns := netnstest.New(t, "nodeaddr")
	ns.MustRun(t, "ip", "link", "add", "a0", "type", "veth", "peer", "name", "a1")
	ns.MustRun(t, "ip", "addr", "add", "10.0.0.5/24", "dev", "a0")
	ns.MustRun(t, "ip", "addr", "add", "192.168.7.2/24", "dev", "a0")
	ns.MustRun(t, "ip", "link", "set", "a0", "up")

	spec, err := Parse([]string{"10.0.0.0/8", "localhost", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan Selection, 16)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := Start(ctx, WatchConfig{Spec: spec, NetNS: ns.Fd, Resync: time.Hour, Settle: 20 * time.Millisecond,
		OnChange: func(s Selection) { got <- s }})
	if err != nil {
		t.Fatal(err)
	}
	want := func(addrs string) {
		t.Helper()
		w := Selection{Addrs: addrsOf(addrs)}
		poll.Eventually(t, 5*time.Second, "selection "+addrs, func() (bool, string) {
			select {
			case s := <-got:
				return s.Equal(w), fmt.Sprintf("last: %+v", s)
			default:
				return false, "no change reported"
			}
		})
	}
	// lo is up with 127.0.0.1 and ::1; the veth's addresses in 10/8 count, 192.168 not.
	want("10.0.0.5 127.0.0.1 ::1")
	if cur := w.Current(); !cur.Equal(Selection{Addrs: addrsOf("10.0.0.5 127.0.0.1 ::1")}) {
		t.Errorf("Current() = %+v", cur)
	}

	// An address on a link that is down counts too, as in kube-proxy.
	ns.MustRun(t, "ip", "addr", "add", "10.9.0.1/16", "dev", "a1")
	want("10.0.0.5 10.9.0.1 127.0.0.1 ::1")

	ns.MustRun(t, "ip", "addr", "add", "192.168.8.1/24", "dev", "a1") // outside the list: no change
	ns.MustRun(t, "ip", "addr", "del", "10.0.0.5/24", "dev", "a0")
	want("10.9.0.1 127.0.0.1 ::1")

	ns.MustRun(t, "ip", "link", "del", "a0") // takes a1's addresses with it
	want("127.0.0.1 ::1")
}

func addrsOf(s string) []netip.Addr { return addrs(s) }

// TestWatcherFollowsPrimary: with --nodeport-addresses=primary, a new primary IP
// (the Node's addresses changed) moves the selection without any address event.
func TestWatcherFollowsPrimary(t *testing.T) {
	ns := netnstest.New(t, "nodeprim")
	ns.MustRun(t, "ip", "link", "add", "p0", "type", "veth", "peer", "name", "p1")
	ns.MustRun(t, "ip", "addr", "add", "10.0.0.5/24", "dev", "p0")
	ns.MustRun(t, "ip", "addr", "add", "172.18.0.3/24", "dev", "p1")
	spec, err := Parse([]string{"primary", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan Selection, 16)
	w, err := Start(t.Context(), WatchConfig{Spec: spec, Primary: addrsOf("172.18.0.3"), NetNS: ns.Fd, Resync: time.Hour,
		OnChange: func(s Selection) { got <- s }})
	if err != nil {
		t.Fatal(err)
	}
	if s := <-got; !s.Equal(Selection{Addrs: addrsOf("172.18.0.3")}) {
		t.Fatalf("first selection %+v, want 172.18.0.3", s)
	}
	w.SetPrimary(addrsOf("10.0.0.5"))
	select {
	case s := <-got:
		if !s.Equal(Selection{Addrs: addrsOf("10.0.0.5")}) {
			t.Errorf("after SetPrimary(10.0.0.5): %+v", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("SetPrimary changed nothing")
	}
	w.SetPrimary(addrsOf("10.0.0.5")) // the same: no change reported
	select {
	case s := <-got:
		t.Errorf("the same primary reported a change: %+v", s)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestWatcherFollowsIPv6Addresses: IPv6 addresses on the namespace's interfaces
// (link-local ones included) are read and followed like IPv4 ones; `primary`
// picks the IPv6 primary for the IPv6 family while a CIDR restricts IPv4, and
// the per-family views are what each family's proxy gets.
func TestWatcherFollowsIPv6Addresses(t *testing.T) {
	ns := netnstest.New(t, "nodeaddr6")
	ns.MustRun(t, "ip", "link", "add", "s0", "type", "veth", "peer", "name", "s1")
	ns.MustRun(t, "ip", "addr", "add", "10.0.0.5/24", "dev", "s0")
	ns.MustRun(t, "ip", "-6", "addr", "add", "fd00:18::3/64", "dev", "s0", "nodad")
	ns.MustRun(t, "ip", "-6", "addr", "add", "fd00:99::9/64", "dev", "s0", "nodad")
	ns.MustRun(t, "ip", "-6", "addr", "add", "fe80::5/64", "dev", "s1", "nodad")

	spec, err := Parse([]string{"primary", "10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan Selection, 16)
	w, err := Start(t.Context(), WatchConfig{Spec: spec, Primary: addrsOf("fd00:18::3"), NetNS: ns.Fd, Resync: time.Hour,
		Settle: 20 * time.Millisecond, OnChange: func(s Selection) { got <- s }})
	if err != nil {
		t.Fatal(err)
	}
	want := func(v4, v6 string) {
		t.Helper()
		poll.Eventually(t, 5*time.Second, "selection "+v4+" / "+v6, func() (bool, string) {
			select {
			case s := <-got:
				a4, all4 := s.IPv4()
				a6, all6 := s.IPv6()
				ok := !all4 && !all6 && fmt.Sprint(a4) == fmt.Sprint(addrsOf(v4)) && fmt.Sprint(a6) == fmt.Sprint(addrsOf(v6))
				return ok, fmt.Sprintf("last: IPv4 %v (all %v), IPv6 %v (all %v)", a4, all4, a6, all6)
			default:
				return false, "no change reported"
			}
		})
	}
	want("10.0.0.5", "fd00:18::3")

	// The Node's IPv6 address moves to another interface address.
	w.SetPrimary(addrsOf("fd00:99::9"))
	want("10.0.0.5", "fd00:99::9")

	// Removing it from the interface removes it from the selection.
	ns.MustRun(t, "ip", "-6", "addr", "del", "fd00:99::9/64", "dev", "s0")
	want("10.0.0.5", "")

	// With `all` for IPv6 (::/0) the link-local and loopback addresses count too.
	spec6, err := Parse([]string{"::/0", "10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	all := make(chan Selection, 4)
	if _, err := Start(t.Context(), WatchConfig{Spec: spec6, NetNS: ns.Fd, Resync: time.Hour,
		OnChange: func(s Selection) { all <- s }}); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-all:
		a6, all6 := s.IPv6()
		if !all6 || fmt.Sprint(a6) != fmt.Sprint(addrsOf("::1 fd00:18::3 fe80::5")) {
			t.Errorf("IPv6() with ::/0 = %v, %v; want [::1 fd00:18::3 fe80::5], true", a6, all6)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no selection with ::/0")
	}
}
