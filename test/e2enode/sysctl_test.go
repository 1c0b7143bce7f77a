//go:build e2enode

package e2enode

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/internal/poll"
)

// TestNodeSysctls: svcproxy's DaemonSet pod (CAP_NET_ADMIN only, /proc/sys
// read-only) writes the sysctls kube-proxy writes in the node's network
// namespace, through deploy/'s mount of the node's /proc/sys/net: the
// conntrack timeouts at kube-proxy's defaults (upstream's "KubeProxy should
// set TCP CLOSE_WAIT timeout" failed without them) and route_localnet, so that
// a NodePort answers on 127.0.0.1 from the node (upstream's LocalhostNodePorts
// specs failed: the pod could not set it).
func TestNodeSysctls(t *testing.T) {
	c := theCluster
	ctx := context.Background()
	c.saveProxyLogsOnFailure(t)
	c.svcproxyAndSeed(t, ctx, 2)
	// The kernel's values back (kube-proxy, in the swap scenario, writes the same
	// ones), then svcproxy's pods restarted: what is read below is theirs.
	for _, n := range c.nodes {
		if out, err := netns.Exec(n.netns, "sysctl", "-qw", "net.netfilter.nf_conntrack_tcp_timeout_established=432000",
			"net.netfilter.nf_conntrack_tcp_timeout_close_wait=60", "net.ipv4.conf.all.route_localnet=0"); err != nil {
			t.Fatalf("%s: %v\n%s", n.name, err, out)
		}
	}
	if _, err := c.kubectl(ctx, "-n", "kube-system", "delete", "pod", "-l", svcproxyPods); err != nil {
		t.Fatal(err)
	}
	if _, err := c.waitDaemonSetReady(ctx, "svcproxy", svcproxyPods, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		for path, want := range map[string]string{
			"/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established": "86400",
			"/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_close_wait":  "3600",
			"/proc/sys/net/ipv4/conf/all/route_localnet":                   "1",
		} {
			poll.Eventually(t, 30*time.Second, n.name+" "+path, func() (bool, string) {
				out, err := netns.Exec(n.netns, "cat", path)
				return err == nil && strings.TrimSpace(out) == want, fmt.Sprintf("%q (%v), want %s", strings.TrimSpace(out), err, want)
			})
		}
	}

	seed, err := c.seedService()
	if err != nil {
		t.Fatal(err)
	}
	np := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "my-nginx-localhost", Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: seed.Spec.Selector,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: seed.Spec.Ports[0].TargetPort, Protocol: corev1.ProtocolTCP}}},
	}
	np, err = c.client.CoreV1().Services("default").Create(ctx, np, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.client.CoreV1().Services("default").Delete(context.Background(), np.Name, metav1.DeleteOptions{})
	})
	addr := fmt.Sprintf("127.0.0.1:%d", np.Spec.Ports[0].NodePort)
	for _, n := range c.workers() {
		client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
			DisableKeepAlives: true, DialContext: netns.DialFunc(n.netns, 2*time.Second)}}
		poll.Eventually(t, 30*time.Second, n.name+" -> "+addr, func() (bool, string) {
			resp, err := client.Get("http://" + addr + "/")
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return err == nil && resp.StatusCode == http.StatusOK, fmt.Sprintf("%d %q %v", resp.StatusCode, b, err)
		})
	}
	pods, err := c.waitDaemonSetReady(ctx, "svcproxy", svcproxyPods, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		out, err := c.kubectl(ctx, "-n", "kube-system", "logs", p.Name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, "cannot set a sysctl") || strings.Contains(out, "Setting the configured conntrack timeouts") {
			t.Errorf("%s could not write a sysctl:\n%s", p.Name, out)
		}
	}
}
