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
