package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
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
	"github.com/svcproxy/svcproxy/pkg/nodeaddr"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

// localServices: "web" has one endpoint on node "me" and one elsewhere, "far" only
// one elsewhere; both externalTrafficPolicy: Local with a health check node port.
const localServices = `apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.20
  clusterIPs: [10.96.0.20]
  externalTrafficPolicy: Local
  healthCheckNodePort: 32100
  ports: [{port: 80, protocol: TCP, targetPort: 80, nodePort: 30080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: "", port: 80, protocol: TCP}]
endpoints:
- {addresses: [10.244.1.2], conditions: {ready: true}, nodeName: me}
- {addresses: [10.244.2.2], conditions: {ready: true}, nodeName: other}
---
apiVersion: v1
kind: Service
metadata: {name: far, namespace: default}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.21
  clusterIPs: [10.96.0.21]
  externalTrafficPolicy: Local
  healthCheckNodePort: 32101
  ports: [{port: 80, protocol: TCP, targetPort: 80, nodePort: 30081}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: far-1, namespace: default, labels: {kubernetes.io/service-name: far}}
addressType: IPv4
ports: [{name: "", port: 80, protocol: TCP}]
endpoints:
- {addresses: [10.244.2.3], conditions: {ready: true}, nodeName: other}
`

// TestHealthCheckNodePortsWired runs svcproxy in a node namespace of its own and
// asks the health check node ports as a load balancer would: the proxy's Local
// Services reach the health check server, which listens only on the addresses
// --nodeport-addresses selects, and follows an address added later; the
// proxy's NodePorts (the nodeport-ips set) follow the same addresses.
func TestHealthCheckNodePortsWired(t *testing.T) {
	netnstest.RequireRoot(t)
	node := netnstest.New(t, "hcwire")
	node.MustRun(t, "ip", "link", "add", "n0", "type", "veth", "peer", "name", "n1")
	node.MustRun(t, "ip", "addr", "add", "10.0.0.5/24", "dev", "n0")
	node.MustRun(t, "ip", "addr", "add", "192.168.7.2/24", "dev", "n1")
	node.MustRun(t, "ip", "link", "set", "n0", "up")
	node.MustRun(t, "ip", "link", "set", "n1", "up")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "svc.yaml"), localServices)
	logPath := filepath.Join(t.TempDir(), "svcproxy.log")
	dumpLogOnFailure(t, "svcproxy", logPath)
	startSvcproxy(t, node, logPath, "--manifests", dir, "--hostname-override", "me", "--nodeport-addresses", "10.0.0.0/8",
		"--metrics-bind-address", metricsAddr, "--healthz-bind-address", healthzAddr)

	ask := func(addr string) (int, string) {
		resp, err := node.HTTPClient(time.Second).Get("http://" + addr + "/")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	expect := func(addr string, code int, has string) {
		t.Helper()
		poll.Eventually(t, 10*time.Second, fmt.Sprintf("%s to answer %d", addr, code), func() (bool, string) {
			c, b := ask(addr)
			return c == code && strings.Contains(b, has), fmt.Sprintf("%d %s", c, b)
		})
	}
	nodePortIPs := func(want string) {
		t.Helper()
		poll.Eventually(t, 10*time.Second, "nodeport-ips "+want, func() (bool, string) {
			table, _ := node.Run("nft", "list", "table", "ip", "svcproxy")
			i := strings.Index(table, "set nodeport-ips {")
			if i < 0 {
				return false, table
			}
			set := table[i:]
			set = set[:strings.Index(set, "}")+1]
			return strings.Contains(set, want) && !strings.Contains(set, "192.168.7.2"), set
		})
	}
	// The proxy serves NodePorts on the selected address, not the other one.
	nodePortIPs("elements = { 10.0.0.5 }")
	expect("10.0.0.5:32100", 200, `"localEndpoints": 1,`)
	expect("10.0.0.5:32101", 503, `"localEndpoints": 0,`)
	expect("192.168.7.2:32100", 0, "connection refused") // outside --nodeport-addresses

	node.MustRun(t, "ip", "addr", "add", "10.0.1.9/24", "dev", "n1")
	expect("10.0.1.9:32100", 200, `"name": "web"`)
	nodePortIPs("elements = { 10.0.0.5, 10.0.1.9 }")

	// far goes: its port closes.
	replaceFile(t, filepath.Join(dir, "svc.yaml"), localServices[:strings.Index(localServices, "---\napiVersion: v1\nkind: Service\nmetadata: {name: far")])
	expect("10.0.0.5:32101", 0, "connection refused")
	expect("10.0.0.5:32100", 200, `"name": "web"`)
}

// TestPrimaryFollowsTheNode: with --nodeport-addresses=primary the health check
// ports (and the proxy's NodePorts, fed from the same selection) move when the
// Node's InternalIP changes, without a restart.
func TestPrimaryFollowsTheNode(t *testing.T) {
	netnstest.RequireRoot(t)
	ns := netnstest.New(t, "primary")
	ns.MustRun(t, "ip", "link", "add", "q0", "type", "veth", "peer", "name", "q1")
	ns.MustRun(t, "ip", "addr", "add", "10.0.0.5/24", "dev", "q0")
	ns.MustRun(t, "ip", "addr", "add", "172.18.0.3/24", "dev", "q1")
	ns.MustRun(t, "ip", "link", "set", "q0", "up")
	ns.MustRun(t, "ip", "link", "set", "q1", "up")

	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "me"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.18.0.3"}}}})
	node := watchNode(t.Context(), fakeCluster(client), "me", 10*time.Second)
	o := &options{nodePorts: nodeaddr.Spec{Primary: true}, bindAddress: "0.0.0.0", syncPeriod: time.Hour}
	p := proxy.New(proxy.Config{Tracker: endpoints.NewTracker(endpoints.TrackerOptions{}), Kernel: nft.NewFake()})
	hc := healthcheck.New(healthcheck.Config{Listen: ns.Listen})
	defer hc.Close()
	hc.Sync(map[endpoints.ServiceKey]healthcheck.Service{{Namespace: "default", Name: "web"}: {NodePort: 32100, LocalEndpoints: 1}})
	// The watcher's netlink sockets open in the namespace, and stay there.
	if err := netns.Do(ns.Path(), func() error { return watchNodePortAddresses(t.Context(), o, &node, p, hc) }); err != nil {
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
