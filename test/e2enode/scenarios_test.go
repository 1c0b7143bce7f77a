//go:build e2enode

package e2enode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcproxy/svcproxy/internal/poll"
)

// The scenarios share one cluster and run in this order; each makes sure of
// what it needs, so that E2ENODE_RUN can pick one.

// clients makes sure a client pod runs on every worker and returns their names.
func (c *cluster) clients(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	var names []string
	for _, n := range c.workers() {
		name := "client-" + n.short
		if _, err := c.client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err != nil {
			if _, err := c.createClientPod(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		names = append(names, name)
	}
	if _, err := c.waitPodsReady(ctx, "default", "app=e2enode-client", len(names), 2*time.Minute); err != nil {
		t.Fatalf("client pods: %v", err)
	}
	return names
}

// TestDaemonSetApply: on a cluster without any service proxy, `kubectl apply
// -k` of deploy/ (with the kind overlay's two values) makes svcproxy's pod
// Ready on every node through its own probes, from its image, and the seed
// Service's ClusterIP then answers from a pod on each node. The svcproxy
// process runs with CAP_NET_ADMIN and nothing else, and never logs
// "forbidden".
func TestDaemonSetApply(t *testing.T) {
	c := theCluster
	ctx := context.Background()
	c.saveProxyLogsOnFailure(t)
	clients := c.clients(t)
	if err := c.ensureSeed(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := c.nginxPods(ctx, 2); err != nil {
		t.Fatal(err)
	}
	// Nothing serves the ClusterIP yet: the answer below is svcproxy's.
	// (Until it answers, from ports no later connection uses: see
	// unservedPorts.) The first probe's port is kept: its SYN leaves an
	// untranslated, unanswered conntrack entry that svcproxy must delete.
	trapped := unservedPorts.take()
	if got, err := getFromPort(clients[0], nginxVIP, time.Second, trapped); err == nil {
		t.Fatalf("ClusterIP answered (%q) before any proxy runs", got)
	}

	start := time.Now()
	if err := c.applySvcproxy(ctx); err != nil {
		t.Fatal(err)
	}
	applied := time.Since(start)
	firstAnswer := make(chan time.Duration, 1)
	go func() {
		// A new connection every 20 ms from the first worker's client.
		for time.Since(start) < 3*time.Minute {
			if _, err := getFromUnserved(clients[0], nginxVIP, 200*time.Millisecond); err == nil {
				firstAnswer <- time.Since(start)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		close(firstAnswer)
	}()
	pods, err := c.waitDaemonSetReady(ctx, "svcproxy", svcproxyPods, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ready := time.Since(start)
	first, ok := <-firstAnswer
	if !ok {
		t.Fatal("the ClusterIP never answered")
	}
	t.Logf("kubectl apply -k took %v; svcproxy Ready on %d nodes %v after the apply began; first ClusterIP answer after %v",
		applied.Round(time.Millisecond), len(pods), ready.Round(time.Millisecond), first.Round(time.Millisecond))
	fmt.Printf("METRIC apply_to_ready_s=%.2f apply_to_first_answer_s=%.2f\n", ready.Seconds(), first.Seconds())

	for _, p := range pods {
		if !p.Spec.HostNetwork || p.Status.PodIP == "" {
			t.Errorf("%s: hostNetwork=%v podIP=%q", p.Name, p.Spec.HostNetwork, p.Status.PodIP)
		}
		// Ready is the probes' verdict only if there are probes.
		ctr := p.Spec.Containers[0]
		if ctr.ReadinessProbe == nil || ctr.LivenessProbe == nil {
			t.Errorf("%s: readiness probe %v, liveness probe %v: Ready proves nothing", p.Name, ctr.ReadinessProbe, ctr.LivenessProbe)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount != 0 {
				t.Errorf("%s: container %s restarted %d times", p.Name, cs.Name, cs.RestartCount)
			}
		}
	}
	for _, n := range c.nodes {
		pid, err := svcproxyPid(n.name)
		if err != nil {
			t.Fatal(err)
		}
		caps, err := readCaps(pid)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: svcproxy pid %d CapEff=%016x CapPrm=%016x CapBnd=%016x CapInh=%016x CapAmb=%016x",
			n.name, pid, caps.eff, caps.prm, caps.bnd, caps.inh, caps.amb)
		if caps.eff != capNetAdmin || caps.prm != capNetAdmin || caps.bnd != capNetAdmin {
			t.Errorf("%s: svcproxy's capabilities are eff=%x prm=%x bnd=%x, want NET_ADMIN only (%x)", n.name, caps.eff, caps.prm, caps.bnd, capNetAdmin)
		}
	}
	for _, client := range clients {
		poll.Eventually(t, 30*time.Second, client+" -> my-nginx", func() (bool, string) {
			got, err := getFrom(client, nginxVIP, 2*time.Second)
			return err == nil, fmt.Sprint(got, err)
		})
	}
	// The port whose SYN went out untranslated before any proxy ran: every
	// later SYN from it follows that entry for 120 s, renewed by each SYN
	// (kube-proxy leaves it); svcproxy deleted it after its first sync.
	served := time.Now()
	poll.Eventually(t, 10*time.Second, fmt.Sprintf("%s -> my-nginx from port %d, whose first SYN nothing answered", clients[0], trapped), func() (bool, string) {
		got, err := getFromPort(clients[0], nginxVIP, time.Second, trapped)
		return err == nil, fmt.Sprint(got, err)
	})
	fmt.Printf("METRIC unanswered_port_connects_s=%.2f\n", time.Since(served).Seconds())
	for _, p := range pods {
		out, err := c.kubectl(ctx, "-n", "kube-system", "logs", p.Name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, "forbidden") {
			t.Errorf("%s logged \"forbidden\":\n%s", p.Name, out)
		}
	}
}

// TestSeedWalkthrough: the seed tutorial with real containers: 2 replicas
// reachable through the ClusterIP from a pod on each node; kubectl scale to
// 3 and the third answers; a deleted pod's replacement answers and the
// deleted one stops being chosen; scale to 1 and the client on the other
// node reaches it (cross-node).
func TestSeedWalkthrough(t *testing.T) {
	c := theCluster
	ctx := context.Background()
	clients := c.clients(t)
	c.svcproxyAndSeed(t, ctx, 2)
	if _, err := c.kubectl(ctx, "scale", "deployment/my-nginx", "--replicas=2"); err != nil {
		t.Fatal(err)
	}
	expect := func(what string, n int) []string {
		t.Helper()
		pods, err := c.nginxPods(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		for _, client := range clients {
			poll.Eventually(t, 30*time.Second, what+" from "+client, func() (bool, string) {
				got, failed := answers(client, nginxVIP, 10*n)
				return sameSet(got, pods) && failed == 0, fmt.Sprintf("answers %v (%d failed), pods %v", got, failed, pods)
			})
		}
		t.Logf("%s: %v answer from %v", what, pods, clients)
		return pods
	}
	expect("2 replicas", 2)
	if _, err := c.kubectl(ctx, "scale", "deployment/my-nginx", "--replicas=3"); err != nil {
		t.Fatal(err)
	}
	pods := expect("scaled to 3", 3)
	if _, err := c.kubectl(ctx, "delete", "pod", pods[0], "--wait=false"); err != nil {
		t.Fatal(err)
	}
	after := expect("after deleting "+pods[0], 3)
	for _, p := range after {
		if p == pods[0] {
			t.Fatalf("deleted pod %s still listed Ready", p)
		}
	}
	if _, err := c.kubectl(ctx, "scale", "deployment/my-nginx", "--replicas=1"); err != nil {
		t.Fatal(err)
	}
	one := expect("scaled to 1", 1)
	pod, err := c.client.CoreV1().Pods("default").Get(ctx, one[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cross := false
	for _, n := range c.workers() {
		if n.name != pod.Spec.NodeName {
			cross = true // that node's client reached it above
		}
	}
	if !cross {
		t.Errorf("no client on another node than %s", pod.Spec.NodeName)
	}
	svc, err := c.client.CoreV1().Services("default").Get(ctx, "my-nginx", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP+":80" != nginxVIP {
		t.Errorf("ClusterIP changed: %s", svc.Spec.ClusterIP)
	}
}

// saveProxyLogsOnFailure writes, when t fails, the logs of the proxies'
// pods (svcproxy's and kube-proxy's, `kubectl logs`) into the run's log
// directory: kubelet keeps them in /var/log/pods, which is the suite's tmpfs
// and goes with it.
func (c *cluster) saveProxyLogsOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx := context.Background()
		list, err := c.client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Log(err)
			return
		}
		for _, p := range list.Items {
			out, err := c.kubectl(ctx, "-n", "kube-system", "logs", p.Name)
			if err != nil {
				t.Log(err)
				continue
			}
			path := filepath.Join(c.logDir, "pod-"+p.Name+".log")
			if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
				t.Log(err)
			}
		}
	})
}

// ensureSvcproxy applies svcproxy's install unless its DaemonSet is Ready.
// svcproxyAndSeed is what most scenarios start from: svcproxy installed and
// Ready, and my-nginx with replicas pods requested.
func (c *cluster) svcproxyAndSeed(t *testing.T, ctx context.Context, replicas int32) {
	t.Helper()
	if err := c.ensureSvcproxy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.ensureSeed(ctx, replicas); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) ensureSvcproxy(ctx context.Context) error {
	if _, err := c.client.AppsV1().DaemonSets("kube-system").Get(ctx, "svcproxy", metav1.GetOptions{}); err != nil {
		if err := c.applySvcproxy(ctx); err != nil {
			return err
		}
	}
	_, err := c.waitDaemonSetReady(ctx, "svcproxy", svcproxyPods, 3*time.Minute)
	return err
}
