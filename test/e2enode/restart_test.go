//go:build e2enode

package e2enode

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/poll"
)

// TestProxyPodsRestart is upstream's "Services should work after restarting
// kube-proxy" for svcproxy's DaemonSet: that spec restarts the pods labelled
// k8s-app=kube-proxy, so with svcproxy (k8s-app=svcproxy) it skips itself
// (docs/conformance.md). Every svcproxy pod deleted at once, the DaemonSet
// brings them back, and the Service is served from every worker again, by
// the same set of pods.
func TestProxyPodsRestart(t *testing.T) {
	c := theCluster
	ctx := context.Background()
	c.saveProxyLogsOnFailure(t)
	clients := c.clients(t)
	if err := c.ensureSvcproxy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.ensureSeed(ctx, 2); err != nil {
		t.Fatal(err)
	}
	pods, err := c.nginxPods(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.waitDaemonSetReady(ctx, "svcproxy", "k8s-app=svcproxy", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.kubectl(ctx, "-n", "kube-system", "delete", "pod", "-l", "k8s-app=svcproxy", "--wait=true"); err != nil {
		t.Fatal(err)
	}
	after, err := c.waitDaemonSetReady(ctx, "svcproxy", "k8s-app=svcproxy", 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]bool{}
	for _, p := range before {
		old[p.Name] = true
	}
	for _, p := range after {
		if old[p.Name] {
			t.Fatalf("pod %s was not replaced", p.Name)
		}
	}
	for _, client := range clients {
		poll.Eventually(t, 30*time.Second, "my-nginx after the restart from "+client, func() (bool, string) {
			got, failed := answers(client, nginxVIP, 20)
			return sameSet(got, pods) && failed == 0, fmt.Sprintf("%v (%d failed), pods %v", got, failed, pods)
		})
	}
}
