//go:build e2enode

package e2enode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/poll"
)

// TestProxyPodsRestart restarts the node proxy the way upstream's "Services
// should work after restarting kube-proxy" and operators do, by deleting the
// pods labelled k8s-app=kube-proxy: those must be svcproxy's, every one; the
// DaemonSet brings them back, and the Service is served from every worker
// again, by the same set of pods. (The file's name puts it after
// scenarios_test.go: scenarios run in file order, and TestDaemonSetApply must
// find no proxy installed.)
func TestProxyPodsRestart(t *testing.T) {
	c := theCluster
	ctx := context.Background()
	c.saveProxyLogsOnFailure(t)
	clients := c.clients(t)
	c.svcproxyAndSeed(t, ctx, 2)
	pods, err := c.nginxPods(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.waitDaemonSetReady(ctx, "svcproxy", svcproxyPods, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.kubectl(ctx, "-n", "kube-system", "delete", "pod", "-l", "k8s-app=kube-proxy", "--wait=true")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range before {
		if !strings.Contains(out, "pod \""+p.Name+"\" deleted") {
			t.Errorf("svcproxy's pod %s is not among the pods labelled k8s-app=kube-proxy:\n%s", p.Name, out)
		}
	}
	after, err := c.waitDaemonSetReady(ctx, "svcproxy", svcproxyPods, 2*time.Minute)
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
