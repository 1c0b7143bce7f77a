package nft

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netnstest"
)

// TestKernelNotificationsPaused: while a gate is paused, the namespace's watchers
// (both families', sharing the gate) hear nothing, not even another program's
// change; on resume each reports its tables as possibly changed (Unwatched), and
// then hears changes by name again.
func TestKernelNotificationsPaused(t *testing.T) {
	ns := netnstest.New(t, "notifygate")
	gate := &NotifyGate{}
	ours4 := &Netlink{NetNSFd: ns.Fd, Notifications: gate}
	ours6 := &Netlink{NetNSFd: ns.Fd, Notifications: gate}
	other := &Netlink{NetNSFd: ns.Fd} // another program: its port is not ours
	for _, k := range []*Netlink{ours4, ours6, other} {
		defer k.Close()
	}
	if err := ours4.Apply(t.Context(), PlanFull(sampleRuleset(), NewView())); err != nil {
		t.Fatal(err)
	}
	if err := ours6.Apply(t.Context(), PlanFull(sampleRuleset6(), NewView())); err != nil {
		t.Fatal(err)
	}

	type report struct {
		family Family
		parts  Parts
	}
	reports := make(chan report, 64)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for _, w := range []struct {
		k      *Netlink
		family Family
	}{{ours4, FamilyIPv4}, {ours6, FamilyIPv6}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := w.k.WatchForeign(ctx, w.family, []string{"sample"}, func(_ string, p Parts) { reports <- report{w.family, p} })
			if err != nil {
				t.Errorf("watch %v: %v", w.family, err)
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()

	next := 0
	foreign := func() {
		t.Helper()
		next++
		tx := &Tx{Family: FamilyIPv4, Table: "sample", AddElements: []Element{{Set: "ips", Key: []Datum{IP(netip.AddrFrom4([4]byte{10, 96, 9, byte(next)}))}}}}
		if err := other.Apply(t.Context(), tx); err != nil {
			t.Fatal(err)
		}
	}
	// expect waits for a report of family, or none within wait (want false).
	expect := func(family Family, wait time.Duration) (Parts, bool) {
		t.Helper()
		deadline := time.After(wait)
		for {
			select {
			case r := <-reports:
				if r.family == family {
					return r.parts, true
				}
			case <-deadline:
				return Parts{}, false
			}
		}
	}

	// The watchers subscribe in their own time: change until IPv4's hears it.
	heard := false
	for range 20 {
		foreign()
		if p, ok := expect(FamilyIPv4, 100*time.Millisecond); ok && p.Sets["ips"] && !p.Unwatched {
			heard = true
			break
		}
	}
	if !heard {
		t.Fatal("the IPv4 watcher never reported another program's change")
	}

	resume := ours4.PauseNotifications()
	drain := time.After(100 * time.Millisecond) // reports of changes before the pause
	for waiting := true; waiting; {
		select {
		case <-reports:
		case <-drain:
			waiting = false
		}
	}
	foreign()
	if p, ok := expect(FamilyIPv4, 300*time.Millisecond); ok {
		t.Fatalf("paused, the IPv4 watcher reported %+v", p)
	}
	resume()
	resume() // a second call does nothing
	got := map[Family]Parts{}
	for len(got) < 2 {
		select {
		case r := <-reports:
			if _, dup := got[r.family]; dup {
				t.Fatalf("%v reported twice on resume: %+v", r.family, r.parts)
			}
			got[r.family] = r.parts
		case <-time.After(2 * time.Second):
			t.Fatalf("on resume, reports from %d of 2 watchers: %+v", len(got), got)
		}
	}
	for f, p := range got {
		if !p.All || !p.Unwatched {
			t.Errorf("%v on resume: %+v, want All and Unwatched", f, p)
		}
	}

	foreign()
	if p, ok := expect(FamilyIPv4, 2*time.Second); !ok || !p.Sets["ips"] || p.All {
		t.Fatalf("after resume, another program's change: %+v (reported %v), want the set named", p, ok)
	}
}
