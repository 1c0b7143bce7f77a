//go:build e2enode

package e2enode

import (
	"context"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/poll"
)

// TestPodNetwork (a check of the harness): a pod on each worker, real
// containers with CNI veths; each reaches the other across nodes by pod IP,
// and is seen with its own address (no NAT on the way).
func TestPodNetwork(t *testing.T) {
	c := theCluster
	ctx := context.Background()
	for _, n := range c.workers() {
		if _, err := c.createClientPod(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	pods, err := c.waitPodsReady(ctx, "default", "app=e2enode-client", len(c.workers()), 2*time.Minute)
	if err != nil {
		t.Fatalf("client pods: %v", err)
	}
	for _, from := range pods {
		for _, to := range pods {
			if from.Name == to.Name {
				continue
			}
			poll.Eventually(t, 20*time.Second, from.Name+" -> "+to.Name, func() (bool, string) {
				got, err := getFrom(from.Name, to.Status.PodIP+":80", 2*time.Second)
				if err != nil {
					return false, err.Error()
				}
				return got == to.Name, got
			})
			seen, err := getFrom(from.Name, to.Status.PodIP+":80/clientip", 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s (%s on %s) -> %s (%s on %s): seen as %s", from.Name, from.Status.PodIP, from.Spec.NodeName,
				to.Name, to.Status.PodIP, to.Spec.NodeName, seen)
			if host := seen; len(host) < len(from.Status.PodIP) || host[:len(from.Status.PodIP)] != from.Status.PodIP {
				t.Errorf("%s seen as %s, want its pod IP %s", from.Name, seen, from.Status.PodIP)
			}
		}
	}
}
