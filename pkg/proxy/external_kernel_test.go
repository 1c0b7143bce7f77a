package proxy

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// addOutside links a namespace to the node by a veth: the node gets nodeAddr/24, the
// namespace peerAddr/24 and a default route through the node. It is a client outside
// the cluster (or another node's address, for the Local policy).
func addOutside(t *testing.T, e *kenv, tag, nodeAddr, peerAddr string) *netnstest.NS {
	t.Helper()
	ns := netnstest.New(t, tag)
	host := fmt.Sprintf("vx%d-%s", os.Getpid()%100000, tag)
	if out, err := e.w.Node.Run("ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns.Name); err != nil {
		t.Fatalf("veth for %s: %v: %s", tag, err, out)
	}
	e.w.Node.MustRun(t, "ip", "addr", "add", nodeAddr+"/24", "dev", host)
	e.w.Node.MustRun(t, "ip", "link", "set", host, "up")
	ns.MustRun(t, "ip", "addr", "add", peerAddr+"/24", "dev", "eth0")
	ns.MustRun(t, "ip", "link", "set", "eth0", "up")
	ns.MustRun(t, "ip", "route", "add", "default", "via", nodeAddr)
	return ns
}

// externalService is a Service of type typ in namespace ns with one TCP and one UDP
// port (NodePorts np and np+1 when np is not 0).
func externalService(name, clusterIP string, typ v1.ServiceType, np int32, local bool) *v1.Service {
	s := testService(name, clusterIP, false, httpPort, dnsPort)
	s.Spec.Type = typ
	if np != 0 {
		s.Spec.Ports[0].NodePort, s.Spec.Ports[1].NodePort = np, np+1
	}
	if local {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = 32000
	}
	return s
}

// sliceOnNodes is testSlice with each endpoint's node: pod -> node.
func sliceOnNodes(svc string, nodes map[string]string) *discoveryv1.EndpointSlice {
	s := testSlice(svc)
	for _, pod := range []string{"pod1", "pod2", "pod3"} {
		if node, ok := nodes[pod]; ok {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{podIPs[pod]}, NodeName: ptr.To(node),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}
	}
	return s
}

// sysctlIn writes sysctls in ns, for Config.SetSysctl: never the test's own namespace.
func sysctlIn(ns *netnstest.NS) func(path, value string) error {
	return func(path, value string) error {
		key := strings.ReplaceAll(strings.TrimPrefix(path, "/proc/sys/"), "/", ".")
		if out, err := ns.Run("sysctl", "-qw", key+"="+value); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
}

// answers asks addr n times from ns and counts who answered; failures count as "".
func answers(ns *netnstest.NS, addr string, n int, timeout time.Duration) map[string]int {
	got := map[string]int{}
	for i := 0; i < n; i++ {
		body, err := ns.Get(addr, timeout)
		if err != nil {
			body = ""
		}
		got[body]++
	}
	return got
}

func clientIP(t *testing.T, ns *netnstest.NS, addr string) string {
	t.Helper()
	c := ns.HTTPClient(2 * time.Second)
	resp, err := c.Get("http://" + addr + "/clientip")
	if err != nil {
		t.Fatalf("GET %s/clientip: %v", addr, err)
	}
	defer resp.Body.Close()
	b := make([]byte, 64)
	n, _ := resp.Body.Read(b)
	return strings.TrimSpace(string(b[:n]))
}

func TestKernelExternalPaths(t *testing.T) {
	e := newKenv(t)
	e.p.cfg.NodeName = "node-a"
	e.p.cfg.LocalhostNodePorts = true
	e.p.cfg.SetSysctl = sysctlIn(e.w.Node)
	e.p.desired = NewRuleset(e.p.cfg.Options)
	outsider := addOutside(t, e, "out", "172.18.0.2", "172.18.0.1")
	peer := addOutside(t, e, "peer", "172.19.0.2", "172.19.0.3")

	np := externalService("np", "10.96.0.20", v1.ServiceTypeNodePort, 30080, false)
	local := externalService("local", "10.96.0.21", v1.ServiceTypeLoadBalancer, 30090, true)
	local.Spec.ExternalIPs = []string{"203.0.113.7"}
	local.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	fenced := externalService("fenced", "10.96.0.22", v1.ServiceTypeLoadBalancer, 0, false)
	fenced.Spec.LoadBalancerSourceRanges = []string{"172.19.0.0/24"}
	fenced.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.11"}}
	elsewhere := externalService("elsewhere", "10.96.0.23", v1.ServiceTypeNodePort, 30100, true)
	sticky := externalService("sticky", "10.96.0.24", v1.ServiceTypeClusterIP, 0, false)
	sticky.Spec.ExternalIPs = []string{"203.0.113.8"}
	sticky.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	for _, s := range []*v1.Service{np, local, fenced, elsewhere, sticky} {
		s.CreationTimestamp = metav1.Now()
		e.tr.OnServiceAdd(s)
	}
	e.tr.OnEndpointSliceAdd(sliceOnNodes("np", map[string]string{"pod1": "node-a", "pod2": "node-b"}))
	e.tr.OnEndpointSliceAdd(sliceOnNodes("local", map[string]string{"pod1": "node-a", "pod3": "node-b"}))
	e.tr.OnEndpointSliceAdd(sliceOnNodes("fenced", map[string]string{"pod2": "node-a"}))
	e.tr.OnEndpointSliceAdd(sliceOnNodes("elsewhere", map[string]string{"pod3": "node-b"}))
	e.tr.OnEndpointSliceAdd(sliceOnNodes("sticky", map[string]string{"pod1": "node-a", "pod2": "node-a", "pod3": "node-b"}))
	e.sync(t)

	t.Run("kernel listing equals render", func(t *testing.T) {
		got := nft.NormalizeListing(e.w.Node.MustRun(t, "nft", "list", "table", "ip", TableName))
		if want := e.p.Desired().Text(); got != want {
			t.Fatalf("kernel listing differs from render\n--- kernel\n%s\n--- render\n%s", got, want)
		}
	})
	t.Run("route_localnet set in the node's namespace", func(t *testing.T) {
		if got := strings.TrimSpace(e.w.Node.MustRun(t, "sysctl", "-n", "net.ipv4.conf.all.route_localnet")); got != "1" {
			t.Fatalf("route_localnet = %s, want 1", got)
		}
	})
	both := func(t *testing.T, who map[string]int, want ...string) {
		t.Helper()
		for _, w := range want {
			if who[w] == 0 {
				t.Fatalf("answers %v, want some from each of %v", who, want)
			}
		}
		if len(who) != len(want) {
			t.Fatalf("answers %v, want only %v", who, want)
		}
	}
	t.Run("NodePort from outside, masqueraded", func(t *testing.T) {
		both(t, answers(outsider, "172.18.0.2:30080", 30, 2*time.Second), "pod1", "pod2")
		if ip := clientIP(t, outsider, "172.18.0.2:30080"); ip == "172.18.0.1" {
			t.Fatalf("endpoint saw the client's own address %s: not masqueraded", ip)
		}
	})
	t.Run("NodePort from another node, on another node address", func(t *testing.T) {
		both(t, answers(peer, "172.19.0.2:30080", 30, 2*time.Second), "pod1", "pod2")
	})
	t.Run("NodePort from a pod", func(t *testing.T) {
		both(t, answers(e.client, "172.18.0.2:30080", 30, 2*time.Second), "pod1", "pod2")
	})
	t.Run("NodePort from the node", func(t *testing.T) {
		both(t, answers(e.w.Node, "172.18.0.2:30080", 30, 2*time.Second), "pod1", "pod2")
	})
	t.Run("NodePort on 127.0.0.1 from the node", func(t *testing.T) {
		both(t, answers(e.w.Node, "127.0.0.1:30080", 30, 2*time.Second), "pod1", "pod2")
	})
	t.Run("UDP NodePort from outside", func(t *testing.T) {
		c, err := outsider.Dial("udp", "172.18.0.2:30081", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if r, err := netnstest.UDP(c, "hi", 2*time.Second); err != nil || !strings.HasSuffix(r, " hi") {
			t.Fatalf("UDP NodePort reply %q, %v", r, err)
		}
	})
	t.Run("Local: outside clients reach this node's endpoint with their own address", func(t *testing.T) {
		for _, addr := range []string{"172.18.0.2:30090", "203.0.113.7:80", "192.0.2.10:80"} {
			both(t, answers(outsider, addr, 15, 2*time.Second), "pod1")
			if ip := clientIP(t, outsider, addr); ip != "172.18.0.1" {
				t.Fatalf("%s: endpoint saw %s, want the client's 172.18.0.1", addr, ip)
			}
		}
	})
	t.Run("Local: pods and the node reach every endpoint (not #131765)", func(t *testing.T) {
		both(t, answers(e.client, "203.0.113.7:80", 30, 2*time.Second), "pod1", "pod3")
		both(t, answers(e.w.Node, "203.0.113.7:80", 30, 2*time.Second), "pod1", "pod3")
		both(t, answers(e.w.Node, "172.18.0.2:30090", 30, 2*time.Second), "pod1", "pod3")
	})
	t.Run("Local: no endpoint on this node drops outside clients, pods still get through", func(t *testing.T) {
		both(t, answers(outsider, "172.18.0.2:30100", 2, 500*time.Millisecond), "")
		both(t, answers(e.client, "172.18.0.2:30100", 5, 2*time.Second), "pod3")
	})
	t.Run("ClientIP affinity on an external IP", func(t *testing.T) {
		if got := answers(outsider, "203.0.113.8:80", 20, 2*time.Second); len(got) != 1 || got[""] != 0 {
			t.Fatalf("sticky external IP answered from %v, want one endpoint", got)
		}
	})
	t.Run("loadBalancerSourceRanges", func(t *testing.T) {
		both(t, answers(peer, "192.0.2.11:80", 5, 2*time.Second), "pod2")
		both(t, answers(outsider, "192.0.2.11:80", 2, 500*time.Millisecond), "")
	})
	t.Run("incoming localnet connections are blocked", func(t *testing.T) {
		e.w.Node.ListenAndClose(t, "tcp", "127.0.0.2:9099")
		// Send to 127.0.0.2 through the node (127.0.0.1 stays the outsider's own).
		outsider.MustRun(t, "ip", "route", "del", "local", "127.0.0.0/8", "dev", "lo", "table", "local")
		outsider.MustRun(t, "ip", "route", "add", "127.0.0.0/8", "via", "172.18.0.2")
		// An attacker's kernel takes the answer from 127.0.0.2 (ours would drop it as martian).
		outsider.MustRun(t, "sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1")
		if c, err := outsider.Dial("tcp", "127.0.0.2:9099", time.Second); err == nil {
			c.Close()
			t.Fatal("a connection from outside the node reached the node's 127.0.0.2")
		}
		// The probe works: with the guard gone the same connection gets through.
		e.w.Node.MustRun(t, "nft", "flush", "chain", "ip", TableName, chainFilterInput)
		defer func() { e.p.RequestResync(); e.sync(t) }()
		c, err := outsider.Dial("tcp", "127.0.0.2:9099", time.Second)
		if err != nil {
			t.Fatalf("without the guard: %v (the probe does not reach the node's 127.0.0.2)", err)
		}
		c.Close()
	})
}

// TestKernelUDPNodePortConntrack: a UDP client that kept its source port is served
// at once when the NodePort's Service gets its first endpoint (its earlier datagrams
// left an untranslated conntrack entry: kubernetes #139628), and follows an endpoint
// replacement.
func TestKernelUDPNodePortConntrack(t *testing.T) {
	e := newKenv(t)
	outsider := addOutside(t, e, "out", "172.18.0.2", "172.18.0.1")
	e.p.SetNodeAddresses([]netip.Addr{netip.MustParseAddr("172.18.0.2")}, true)
	e.sync(t) // the table, without the Service
	c, err := outsider.DialFrom("udp", ":40081", "172.18.0.2:30081", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r, err := netnstest.UDP(c, "early", 300*time.Millisecond); err == nil {
		t.Fatalf("a NodePort no Service has answered %q", r)
	}
	if out := e.w.Node.MustRun(t, "conntrack", "-L", "-p", "udp", "--dport", "30081"); !strings.Contains(out, "dport=30081") {
		t.Fatalf("no untranslated entry to start from:\n%s", out)
	}
	e.tr.OnServiceAdd(externalService("np", "10.96.0.20", v1.ServiceTypeNodePort, 30080, false))
	e.tr.OnEndpointSliceAdd(sliceOnNodes("np", map[string]string{"pod1": ""}))
	e.sync(t)
	if r, err := netnstest.UDP(c, "a", 2*time.Second); err != nil || r != "pod1 a" {
		t.Fatalf("first datagram after the first endpoint: %q, %v (stale untranslated entry?)", r, err)
	}
	e.tr.OnEndpointSliceUpdate(nil, sliceOnNodes("np", map[string]string{"pod3": ""}))
	e.sync(t)
	if r, err := netnstest.UDP(c, "b", 2*time.Second); err != nil || r != "pod3 b" {
		t.Fatalf("after replacing pod1 by pod3: %q, %v", r, err)
	}
}
