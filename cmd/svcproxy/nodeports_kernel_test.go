package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/poll"
)

// localService is a LoadBalancer Service with externalTrafficPolicy: Local, a
// health check node port and TCP port 80, and its EndpointSlice: one ready
// endpoint per address, each on the node named beside it.
func localService(name, clusterIP string, healthCheckNodePort, nodePort int, endpoints ...[2]string) string {
	s := fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %[1]s, namespace: default}
spec:
  type: LoadBalancer
  clusterIP: %[2]s
  clusterIPs: [%[2]s]
  externalTrafficPolicy: Local
  healthCheckNodePort: %[3]d
  ports: [{port: 80, protocol: TCP, targetPort: 80, nodePort: %[4]d}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: %[1]s-1, namespace: default, labels: {kubernetes.io/service-name: %[1]s}}
addressType: IPv4
ports: [{name: "", port: 80, protocol: TCP}]
endpoints:
`, name, clusterIP, healthCheckNodePort, nodePort)
	for _, e := range endpoints {
		s += fmt.Sprintf("- {addresses: [%s], conditions: {ready: true}, nodeName: %s}\n", e[0], e[1])
	}
	return s
}

// webService has one endpoint on node "me" and one elsewhere, farService only
// one elsewhere.
var (
	webService = localService("web", "10.96.0.20", 32100, 30080, [2]string{"10.244.1.2", "me"}, [2]string{"10.244.2.2", "other"})
	farService = localService("far", "10.96.0.21", 32101, 30081, [2]string{"10.244.2.3", "other"})
)

// TestHealthCheckNodePortsWired runs svcproxy in a node namespace of its own and
// asks the health check node ports as a load balancer would: the proxy's Local
// Services reach the health check server, which listens only on the addresses
// --nodeport-addresses selects, and follows an address added later; the
// proxy's NodePorts (the nodeport-ips set) follow the same addresses.
func TestHealthCheckNodePortsWired(t *testing.T) {
	netnstest.RequireRoot(t)
	node := netnstest.New(t, "hcwire")
	node.VethPair(t, "n0", "10.0.0.5/24", "n1", "192.168.7.2/24")
	dir := t.TempDir()
	manifest := filepath.Join(dir, "svc.yaml")
	// put writes the manifest as editors do: next to it, then renamed over it.
	put := func(data string) {
		t.Helper()
		if err := os.WriteFile(manifest+".tmp~", []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(manifest+".tmp~", manifest); err != nil {
			t.Fatal(err)
		}
	}
	put(webService + "---\n" + farService)
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
	put(webService)
	expect("10.0.0.5:32101", 0, "connection refused")
	expect("10.0.0.5:32100", 200, `"name": "web"`)
}
