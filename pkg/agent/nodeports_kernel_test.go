package agent

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/healthcheck"
	"github.com/svcproxy/svcproxy/pkg/nft"
	"github.com/svcproxy/svcproxy/pkg/node"
	"github.com/svcproxy/svcproxy/pkg/nodeaddr"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

// TestPrimaryFollowsTheNode: with --nodeport-addresses=primary the health check
// ports (and the proxy's NodePorts, fed from the same selection) move when the
// Node's InternalIP changes, without a restart.
func TestPrimaryFollowsTheNode(t *testing.T) {
	netnstest.RequireRoot(t)
	ns := netnstest.New(t, "primary")
	ns.VethPair(t, "q0", "10.0.0.5/24", "q1", "172.18.0.3/24")

	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "me"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.18.0.3"}}}})
	w := node.Watch(t.Context(), client.CoreV1(), client, "me", 10*time.Second)
	o := &Options{NodePorts: nodeaddr.Spec{Primary: true}, BindAddress: "0.0.0.0", SyncPeriod: time.Hour}
	p := proxy.New(proxy.Config{Tracker: endpoints.NewTracker(endpoints.TrackerOptions{}), Kernel: nft.NewFake()})
	hc := healthcheck.New(healthcheck.Config{Listen: ns.Listen})
	defer hc.Close()
	hc.Sync(map[endpoints.ServiceKey]healthcheck.Service{{Namespace: "default", Name: "web"}: {NodePort: 32100, LocalEndpoints: 1}})
	// The watcher's netlink sockets open in the namespace, and stay there.
	if err := netns.Do(ns.Path(), func() error { return watchNodePortAddresses(t.Context(), o, &w, 0, familyProxies{{proxy: p}}, hc) }); err != nil {
		t.Fatal(err)
	}
	answers := func(addr string, want bool) {
		t.Helper()
		poll.Eventually(t, 10*time.Second, fmt.Sprintf("%s answering: %v", addr, want), func() (bool, string) {
			resp, err := ns.HTTPClient(time.Second).Get("http://" + addr + "/")
			if err != nil {
				return !want, err.Error()
			}
			resp.Body.Close()
			return want, resp.Status
		})
	}
	answers("172.18.0.3:32100", true)
	answers("10.0.0.5:32100", false)

	n, err := client.CoreV1().Nodes().Get(t.Context(), "me", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses[0].Address = "10.0.0.5"
	if _, err := client.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	answers("10.0.0.5:32100", true)
	answers("172.18.0.3:32100", false)
}
