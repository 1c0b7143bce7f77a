package proxy

import (
	"fmt"
	"testing"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// releasingFake counts the kernel's buffer releases.
type releasingFake struct {
	*nft.Fake
	released int
}

func (k *releasingFake) ReleaseBuffers() { k.released++ }

// TestBigSyncReleasesTheKernelsBuffers: a sync of more than bigTransaction
// objects drops the buffers the kernel keeps between transactions; a small
// one keeps them for the next.
func TestBigSyncReleasesTheKernelsBuffers(t *testing.T) {
	k := &releasingFake{Fake: nft.NewFake()}
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	p := New(Config{Tracker: tr, Kernel: k})
	addWeb(tr, "small", "10.96.0.1", "pod1")
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if k.released != 0 {
		t.Fatalf("a small sync released the buffers %d times", k.released)
	}
	// 4 endpoints, a dispatch and a ClusterIP element each: 6 objects a Service.
	for i := range bigTransaction/6 + 1 {
		addWeb(tr, fmt.Sprintf("s%d", i), fmt.Sprintf("10.96.%d.%d", 1+i/250, i%250), "pod1", "pod2", "pod3", "pod4")
	}
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if k.released != 1 {
		t.Errorf("a sync of %d+ objects released the buffers %d times, want once", bigTransaction, k.released)
	}
}
