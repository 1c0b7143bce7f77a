package proxy

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/pkg/conntrack"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// The IPv6 twin of kenv: the same world of namespaces, each pod given a ULA address
// beside its IPv4 one, and a Proxy of family IPv6 programming "ip6 svcproxy".
var pod6IPs = map[string]string{"pod1": "fd00:10:244:1::2", "pod2": "fd00:10:244:1::3", "pod3": "fd00:10:244:1::4", "client": "fd00:10:244:2::9"}

// gateway6 is the pods' IPv6 gateway, on every node-side veth (as 169.254.1.1 is).
const gateway6 = "fd00:ffff::1"

var peerIndex = regexp.MustCompile(`@if(\d+)`)

// addPod6 gives a pod of the world its IPv6 address: /128 on eth0 (nodad: no
// duplicate address detection delay), a default route through gateway6 on the
// node-side veth, and the node's route to the pod.
func addPod6(t *testing.T, w *netnstest.World, pod *netnstest.NS, addr string) {
	t.Helper()
	m := peerIndex.FindStringSubmatch(pod.MustRun(t, "ip", "-o", "link", "show", "eth0"))
	if m == nil {
		t.Fatal("pod eth0 has no peer index")
	}
	var host string
	for _, l := range strings.Split(w.Node.MustRun(t, "ip", "-o", "link"), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == m[1]+":" {
			host = strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
		}
	}
	if host == "" {
		t.Fatalf("no node-side veth with index %s", m[1])
	}
	pod.MustRun(t, "ip", "-6", "addr", "add", addr+"/128", "dev", "eth0", "nodad")
	pod.MustRun(t, "ip", "-6", "route", "add", gateway6, "dev", "eth0")
	pod.MustRun(t, "ip", "-6", "route", "add", "default", "via", gateway6, "dev", "eth0")
	w.Node.MustRun(t, "ip", "-6", "addr", "add", gateway6+"/128", "dev", host, "nodad")
	w.Node.MustRun(t, "ip", "-6", "route", "add", addr+"/128", "dev", host)
	if _, err := w.Node.Run("ip", "-6", "route", "show", "default"); err == nil {
		// The first pod's veth takes the node's default route, so that ClusterIP
		// traffic the node originates reaches the nat hooks (as in NewWorld).
		if out := w.Node.MustRun(t, "ip", "-6", "route", "show", "default"); strings.TrimSpace(out) == "" {
			w.Node.MustRun(t, "ip", "-6", "route", "add", "default", "dev", host)
		}
	}
}

func newKenv6(t *testing.T) *kenv {
	t.Helper()
	w := netnstest.NewWorld(t)
	w.Node.MustRun(t, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	e := &kenv{w: w, client: w.AddPod("client", "10.244.2.9")}
	addPod6(t, w, e.client, pod6IPs["client"])
	for _, name := range []string{"pod1", "pod2", "pod3"} {
		ns := w.AddPod(name, podIPs[name])
		addPod6(t, w, ns, pod6IPs[name])
		netnstest.StartEcho(t, ns, name)
	}
	// Link-local addresses pass duplicate address detection for a second or two
	// after a link comes up; until then neighbour discovery on it loses packets.
	for _, ns := range append([]*netnstest.NS{w.Node}, e.client, w.Pods["pod1"], w.Pods["pod2"], w.Pods["pod3"]) {
		waitNoTentative(t, ns)
	}
	e.tr = endpoints.NewTracker(endpoints.TrackerOptions{Family: endpoints.IPv6})
	e.kernel = &nft.Netlink{NetNSFd: w.Node.Fd}
	ct, err := conntrack.New(w.Node.Fd)
	if err != nil {
		t.Fatal(err)
	}
	e.p = New(Config{Tracker: e.tr, Kernel: e.kernel, Conntrack: ct,
		Options: Options{Family: endpoints.IPv6, ClusterCIDR: netip.MustParsePrefix("fd00:10:244::/56"), NodeName: "node-a"}})
	return e
}

func waitNoTentative(t *testing.T, ns *netnstest.NS) {
	t.Helper()
	poll.Eventually(t, 10*time.Second, "IPv6 duplicate address detection in "+ns.Name, func() (bool, string) {
		out, err := ns.Run("ip", "-6", "addr", "show", "tentative")
		return err == nil && strings.TrimSpace(out) == "", out
	})
}

func testService6(name, ip string, affinity bool, ports ...v1.ServicePort) *v1.Service {
	s := testService(name, ip, affinity, ports...)
	s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
	s.CreationTimestamp = metav1.Now()
	return s
}

// testSlice6 is testSlice for IPv6 endpoints; nodes, when given, places each pod.
func testSlice6(svc string, nodes map[string]string, pods ...string) *discoveryv1.EndpointSlice {
	s := testSlice(svc)
	s.AddressType = discoveryv1.AddressTypeIPv6
	for _, pod := range pods {
		ep := discoveryv1.Endpoint{Addresses: []string{pod6IPs[pod]}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}
		if node, ok := nodes[pod]; ok {
			ep.NodeName = ptr.To(node)
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}

// addOutside6 is addOutside in IPv6: the node gets nodeAddr/64 on the link, the
// namespace peerAddr/64 and a default route through the node.
func addOutside6(t *testing.T, e *kenv, tag, nodeAddr, peerAddr string) *netnstest.NS {
	t.Helper()
	ns := netnstest.New(t, tag)
	host := fmt.Sprintf("vy%d-%s", os.Getpid()%100000, tag)
	if out, err := e.w.Node.Run("ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns.Name); err != nil {
		t.Fatalf("veth for %s: %v: %s", tag, err, out)
	}
	e.w.Node.MustRun(t, "ip", "-6", "addr", "add", nodeAddr+"/64", "dev", host, "nodad")
	e.w.Node.MustRun(t, "ip", "link", "set", host, "up")
	ns.MustRun(t, "ip", "-6", "addr", "add", peerAddr+"/64", "dev", "eth0", "nodad")
	ns.MustRun(t, "ip", "link", "set", "eth0", "up")
	ns.MustRun(t, "ip", "-6", "route", "add", "default", "via", nodeAddr)
	return ns
}

func ip6Port(a string, port int) string { return fmt.Sprintf("[%s]:%d", a, port) }

// TestKernelIP6Traffic is TestKernelTraffic in an ip6 table, with real IPv6 TCP and
// UDP: ClusterIPs, ClientIP affinity, rejects, hairpin, the node itself, and
// NodePorts and external IPs with the Cluster (masqueraded) and Local (source kept)
// policies.
func TestKernelIP6Traffic(t *testing.T) {
	e := newKenv6(t)
	outsider := addOutside6(t, e, "out6", "fd00:172:18::2", "fd00:172:18::1")
	e.tr.OnServiceAdd(testService6("web", "fd00:10:96::10", false, httpPort, dnsPort))
	e.tr.OnServiceAdd(testService6("sticky", "fd00:10:96::11", true, httpPort))
	e.tr.OnServiceAdd(testService6("empty", "fd00:10:96::12", false, httpPort, dnsPort))
	np := testService6("np", "fd00:10:96::20", false, httpPort, dnsPort)
	np.Spec.Type, np.Spec.Ports[0].NodePort, np.Spec.Ports[1].NodePort = v1.ServiceTypeNodePort, 30080, 30081
	np.Spec.ExternalIPs = []string{"fd00:203::7"}
	local := testService6("local", "fd00:10:96::21", false, httpPort, dnsPort)
	local.Spec.Type, local.Spec.Ports[0].NodePort, local.Spec.Ports[1].NodePort = v1.ServiceTypeNodePort, 30090, 30091
	local.Spec.ExternalTrafficPolicy, local.Spec.HealthCheckNodePort = v1.ServiceExternalTrafficPolicyLocal, 32000
	local.Spec.ExternalIPs = []string{"fd00:203::8"}
	for _, s := range []*v1.Service{np, local} {
		e.tr.OnServiceAdd(s)
	}
	e.tr.OnEndpointSliceAdd(testSlice6("web", nil, "pod1", "pod2", "pod3"))
	e.tr.OnEndpointSliceAdd(testSlice6("sticky", nil, "pod1", "pod2", "pod3"))
	e.tr.OnEndpointSliceAdd(testSlice6("np", map[string]string{"pod1": "node-a", "pod2": "node-b"}, "pod1", "pod2"))
	e.tr.OnEndpointSliceAdd(testSlice6("local", map[string]string{"pod1": "node-a", "pod3": "node-b"}, "pod1", "pod3"))
	e.sync(t)

	t.Run("kernel listing equals render", func(t *testing.T) {
		got := nft.NormalizeListing(e.w.Node.MustRun(t, "nft", "list", "table", "ip6", TableName))
		if want := e.p.Desired().Text(); got != want {
			t.Fatalf("kernel listing differs from render\n--- kernel\n%s\n--- render\n%s", got, want)
		}
		if out := e.w.Node.MustRun(t, "nft", "list", "tables"); strings.Contains(out, "table ip "+TableName) {
			t.Fatalf("an IPv6 proxy created an ip table: %s", out)
		}
	})
	t.Run("TCP spreads over all endpoints", func(t *testing.T) {
		if got := e.who(t, ip6Port("fd00:10:96::10", 80), 60); len(got) != 3 {
			t.Fatalf("60 requests reached %v, want all of pod1..3", got)
		}
	})
	t.Run("UDP round trip", func(t *testing.T) {
		c, err := e.client.Dial("udp", ip6Port("fd00:10:96::10", 53), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if reply, err := netnstest.UDP(c, "hello", 2*time.Second); err != nil || !strings.HasPrefix(reply, "pod") {
			t.Fatalf("UDP reply %q, %v", reply, err)
		}
	})
	t.Run("ClientIP affinity sticks", func(t *testing.T) {
		if got := e.who(t, ip6Port("fd00:10:96::11", 80), 20); len(got) != 1 {
			t.Fatalf("sticky service answered from %v, want one endpoint", got)
		}
	})
	t.Run("no endpoints and wrong port: TCP reset and ICMPv6 port unreachable", func(t *testing.T) {
		for _, addr := range []string{ip6Port("fd00:10:96::12", 80), ip6Port("fd00:10:96::10", 81), ip6Port("fd00:10:96::10", 81)} {
			start := time.Now()
			_, err := e.client.Get(addr, 3*time.Second)
			if err == nil || !strings.Contains(err.Error(), "refused") {
				t.Fatalf("%s: got %v, want connection refused", addr, err)
			}
			if d := time.Since(start); d > 500*time.Millisecond {
				t.Fatalf("%s refused after %v, want well under a second", addr, d)
			}
		}
		c, err := e.client.Dial("udp", ip6Port("fd00:10:96::12", 53), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := netnstest.UDP(c, "x", time.Second); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("UDP to a Service without endpoints: %v, want refused (ICMPv6 port unreachable)", err)
		}
	})
	t.Run("hairpin: a pod reaches itself through its Service", func(t *testing.T) {
		e.tr.OnEndpointSliceUpdate(nil, testSlice6("web", nil, "pod1"))
		e.sync(t)
		body, err := e.w.Pods["pod1"].Get(ip6Port("fd00:10:96::10", 80), 2*time.Second)
		if err != nil || body != "pod1" {
			t.Fatalf("pod1 -> its own Service: %q, %v", body, err)
		}
	})
	t.Run("from the node itself", func(t *testing.T) {
		body, err := e.w.Node.Get(ip6Port("fd00:10:96::10", 80), 2*time.Second)
		if err != nil || body != "pod1" {
			t.Fatalf("node -> Service: %q, %v", body, err)
		}
	})
	t.Run("NodePort and external IP, Cluster policy: masqueraded, every endpoint", func(t *testing.T) {
		for _, addr := range []string{ip6Port("fd00:172:18::2", 30080), ip6Port("fd00:203::7", 80)} {
			if got := answers(outsider, addr, 30, 2*time.Second); got["pod1"] == 0 || got["pod2"] == 0 || len(got) != 2 {
				t.Fatalf("%s answered from %v, want pod1 and pod2", addr, got)
			}
			if ip := clientIP(t, outsider, addr); ip == "fd00:172:18::1" {
				t.Fatalf("%s: the endpoint saw the client's own address %s, want it masqueraded", addr, ip)
			}
		}
	})
	t.Run("NodePort and external IP, Local policy: local endpoint, source kept", func(t *testing.T) {
		for _, addr := range []string{ip6Port("fd00:172:18::2", 30090), ip6Port("fd00:203::8", 80)} {
			if got := answers(outsider, addr, 20, 2*time.Second); got["pod1"] != 20 {
				t.Fatalf("%s answered from %v, want the local pod1 only", addr, got)
			}
			if ip := clientIP(t, outsider, addr); ip != "fd00:172:18::1" {
				t.Fatalf("%s: the endpoint saw %s, want the client's address kept", addr, ip)
			}
		}
	})
	t.Run("UDP NodePort", func(t *testing.T) {
		c, err := outsider.Dial("udp", ip6Port("fd00:172:18::2", 30081), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if reply, err := netnstest.UDP(c, "hi", 2*time.Second); err != nil || !strings.HasPrefix(reply, "pod") {
			t.Fatalf("UDP NodePort reply %q, %v", reply, err)
		}
	})
}

// TestKernelIP6ListingLoadsBackWithNft: `nft list table ip6 svcproxy` loads back
// with `nft -f` and lists the same (a fixed point), and traffic flows through the
// reloaded table. Without ClientIP affinity: nft 1.0.6 cannot load an ip6 affinity
// update (its 40-byte key and 20-byte data exceed what its register allocator
// places; it aborts), see docs/ipv6.md.
func TestKernelIP6ListingLoadsBackWithNft(t *testing.T) {
	e := newKenv6(t)
	e.tr.OnServiceAdd(testService6("web", "fd00:10:96::10", false, httpPort, dnsPort))
	e.tr.OnServiceAdd(testService6("empty", "fd00:10:96::12", false, httpPort, dnsPort))
	np := testService6("np", "fd00:10:96::20", false, httpPort)
	np.Spec.Type, np.Spec.Ports[0].NodePort = v1.ServiceTypeNodePort, 30080
	np.Spec.ExternalTrafficPolicy, np.Spec.HealthCheckNodePort = v1.ServiceExternalTrafficPolicyLocal, 32000
	e.tr.OnServiceAdd(np)
	e.tr.OnEndpointSliceAdd(testSlice6("web", nil, "pod1", "pod2"))
	e.tr.OnEndpointSliceAdd(testSlice6("np", map[string]string{"pod1": "node-a"}, "pod1", "pod2"))
	e.sync(t)
	listing := e.w.Node.MustRun(t, "nft", "list", "table", "ip6", TableName)
	file := filepath.Join(t.TempDir(), "svcproxy.nft")
	if err := os.WriteFile(file, []byte(listing), 0o644); err != nil {
		t.Fatal(err)
	}
	e.w.Node.MustRun(t, "nft", "delete", "table", "ip6", TableName)
	if out, err := e.w.Node.Run("nft", "-f", file); err != nil {
		t.Fatalf("nft -f of the listing: %v\n%s\n--- listing\n%s", err, out, listing)
	}
	if again := e.w.Node.MustRun(t, "nft", "list", "table", "ip6", TableName); nft.NormalizeListing(again) != nft.NormalizeListing(listing) {
		t.Fatalf("the reloaded table lists differently\n--- first\n%s\n--- after nft -f\n%s", listing, again)
	}
	if got := e.who(t, ip6Port("fd00:10:96::10", 80), 30); len(got) != 2 {
		t.Fatalf("after nft -f: web answered from %v, want pod1 and pod2", got)
	}
	if _, err := e.client.Get(ip6Port("fd00:10:96::12", 80), time.Second); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("after nft -f: Service without endpoints: %v, want connection refused", err)
	}
}
