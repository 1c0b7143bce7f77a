//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netnstest"
)

// TestConntrackFill: what the soak's "conntrack table full" fault relies on.
// A namespace filled to nf_conntrack_max refuses new connections while a
// namespace beside it still connects (the count is each namespace's, so the
// fault touches nothing outside the node it fills), and once the fillers are
// deleted by their mark it connects again.
func TestConntrackFill(t *testing.T) {
	full, other := netnstest.New(t, "ctfull"), netnstest.New(t, "ctother")
	for _, ns := range []*netnstest.NS{full, other} {
		// Conntrack runs in a namespace only where a rule needs it.
		ns.MustRun(t, "nft", "add table ip t; add chain ip t out { type filter hook output priority 0; }; add rule ip t out ct state new counter")
		ns.ListenAndClose(t, "tcp", "127.0.0.1:7070")
	}
	connects := func(ns *netnstest.NS) bool {
		c, err := ns.Dial("tcp", "127.0.0.1:7070", 500*time.Millisecond)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	if !connects(full) {
		t.Fatal("no connection before the fill")
	}
	max, err := conntrackMax()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n, err := fillConntrack(full.Name, time.Minute)
	if err != nil {
		t.Fatalf("fill: %v", err)
	}
	t.Logf("%d fillers (nf_conntrack_max %d) in %v", n, max, time.Since(start).Round(time.Millisecond))
	if n < max-10 {
		t.Errorf("the table took %d fillers, nf_conntrack_max is %d", n, max)
	}
	if connects(full) {
		t.Error("a new connection in the full namespace")
	}
	if !connects(other) {
		t.Error("no new connection in the namespace beside the full one")
	}
	if err := drainConntrack(full.Name); err != nil {
		t.Fatal(err)
	}
	if !connects(full) {
		t.Error("no new connection after the fillers were deleted")
	}
}
