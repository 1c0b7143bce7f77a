package proxy

import (
	"testing"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// TestOnSyncedOnlyAfterTheKernelTookEverything: OnSynced (svcproxy removes
// kube-proxy's rules from it) must not run while a Service's rules are refused, or
// that Service would lose the rules that still serve it.
func TestOnSyncedOnlyAfterTheKernelTookEverything(t *testing.T) {
	k := nft.NewFake()
	refusing := refuseService(k, "ns/bad")
	calls := 0
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	p := New(Config{Tracker: tr, Kernel: k, OnSynced: func() { calls++ }})
	addWeb(tr, "bad", "10.96.0.11", "pod2")
	p.Trigger()
	if err := p.Sync(t.Context()); err == nil {
		t.Fatal("sync succeeded although the kernel refuses ns/bad")
	}
	if calls != 0 {
		t.Fatalf("OnSynced called %d times while ns/bad is refused", calls)
	}
	*refusing = false
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("OnSynced called %d times after a whole sync, want 1", calls)
	}
}
