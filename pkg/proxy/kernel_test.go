package proxy

import (
	"context"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/pkg/conntrack"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// kenv is one node with three backend pods and a client pod, and a Proxy programming
// the node's kernel.
type kenv struct {
	w      *netnstest.World
	client *netnstest.NS
	tr     *endpoints.Tracker
	p      *Proxy
	kernel *nft.Netlink
}

// pod4 has no namespace in kernel tests: it is pod3's shard-mate (the last byte
// modulo 16), for tests of shards that exist only while used.
var podIPs = map[string]string{"pod1": "10.244.1.2", "pod2": "10.244.1.3", "pod3": "10.244.1.4", "pod4": "10.244.1.20"}

func newKenv(t *testing.T) *kenv {
	t.Helper()
	w := netnstest.NewWorld(t)
	e := &kenv{w: w, client: w.AddPod("client", "10.244.2.9")}
	for _, name := range []string{"pod1", "pod2", "pod3"} {
		netnstest.StartEcho(t, w.AddPod(name, podIPs[name]), name)
	}
	e.tr = endpoints.NewTracker(endpoints.TrackerOptions{})
	e.kernel = &nft.Netlink{NetNSFd: w.Node.Fd}
	ct, err := conntrack.New(w.Node.Fd)
	if err != nil {
		t.Fatal(err)
	}
	e.p = New(Config{Tracker: e.tr, Kernel: e.kernel, Conntrack: ct, Options: Options{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")}})
	return e
}

func (e *kenv) sync(t *testing.T) {
	t.Helper()
	if err := e.p.Sync(t.Context()); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

type epSpec struct {
	pod         string
	ready       *bool
	serving     *bool
	terminating *bool
}

func readyEP(pod string) epSpec { return epSpec{pod: pod} }

func testService(name, ip string, affinity bool, ports ...v1.ServicePort) *v1.Service {
	s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: v1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}, Ports: ports}}
	if affinity {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
	}
	return s
}

func testSlice(svc string, eps ...epSpec) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: svc + "-abc", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](80)},
			{Name: ptr.To("dns"), Protocol: ptr.To(v1.ProtocolUDP), Port: ptr.To[int32](53)},
		},
	}
	for _, ep := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{podIPs[ep.pod]},
			Conditions: discoveryv1.EndpointConditions{Ready: ep.ready, Serving: ep.serving, Terminating: ep.terminating}})
	}
	return s
}

var (
	httpPort = v1.ServicePort{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}
	dnsPort  = v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}
)

// who asks the ClusterIP n times on new connections and counts the answers.
func (e *kenv) who(t *testing.T, addr string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for i := 0; i < n; i++ {
		body, err := e.client.Get(addr, 2*time.Second)
		if err != nil {
			t.Fatalf("request %d to %s: %v", i, addr, err)
		}
		got[body]++
	}
	return got
}

func TestKernelListingEqualsRender(t *testing.T) {
	e := newKenv(t)
	for _, s := range []*v1.Service{testService("web", "10.96.0.10", false, httpPort, dnsPort), testService("sticky", "10.96.0.11", true, httpPort)} {
		e.tr.OnServiceAdd(s)
	}
	e.tr.OnEndpointSliceAdd(testSlice("web", readyEP("pod1"), readyEP("pod2")))
	e.tr.OnEndpointSliceAdd(testSlice("sticky", readyEP("pod1"), readyEP("pod3")))
	e.sync(t)
	got := nft.NormalizeListing(e.w.Node.MustRun(t, "nft", "list", "table", "ip", TableName))
	if want := e.p.Desired().Text(); got != want {
		t.Fatalf("kernel listing differs from render\n--- kernel\n%s\n--- render\n%s", got, want)
	}
}

func TestKernelTraffic(t *testing.T) {
	e := newKenv(t)
	e.tr.OnServiceAdd(testService("web", "10.96.0.10", false, httpPort, dnsPort))
	e.tr.OnServiceAdd(testService("sticky", "10.96.0.11", true, httpPort))
	e.tr.OnServiceAdd(testService("empty", "10.96.0.12", false, httpPort, dnsPort))
	e.tr.OnEndpointSliceAdd(testSlice("web", readyEP("pod1"), readyEP("pod2"), readyEP("pod3")))
	e.tr.OnEndpointSliceAdd(testSlice("sticky", readyEP("pod1"), readyEP("pod2"), readyEP("pod3")))
	e.sync(t)

	t.Run("TCP spreads over all endpoints", func(t *testing.T) {
		got := e.who(t, "10.96.0.10:80", 60)
		if len(got) != 3 {
			t.Fatalf("60 requests reached %v, want all of pod1..3", got)
		}
	})
	t.Run("UDP round trip", func(t *testing.T) {
		c, err := e.client.Dial("udp", "10.96.0.10:53", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		reply, err := netnstest.UDP(c, "hello", 2*time.Second)
		if err != nil || !strings.HasSuffix(reply, " hello") || !strings.HasPrefix(reply, "pod") {
			t.Fatalf("UDP reply %q, %v", reply, err)
		}
	})
	t.Run("ClientIP affinity sticks", func(t *testing.T) {
		if got := e.who(t, "10.96.0.11:80", 20); len(got) != 1 {
			t.Fatalf("sticky service answered from %v, want one endpoint", got)
		}
	})
	t.Run("stickiness survives an unrelated sync", func(t *testing.T) {
		before := e.who(t, "10.96.0.11:80", 1)
		e.tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod1"), readyEP("pod2")))
		e.sync(t)
		after := e.who(t, "10.96.0.11:80", 10)
		for k := range before {
			if after[k] != 10 {
				t.Fatalf("before the sync the client stuck to %v, after it got %v", before, after)
			}
		}
	})
	t.Run("no endpoints and wrong port are refused fast", func(t *testing.T) {
		for _, addr := range []string{"10.96.0.12:80", "10.96.0.10:81"} {
			start := time.Now()
			_, err := e.client.Get(addr, 3*time.Second)
			if err == nil || !strings.Contains(err.Error(), "refused") {
				t.Fatalf("%s: got %v, want connection refused", addr, err)
			}
			if d := time.Since(start); d > 500*time.Millisecond {
				t.Fatalf("%s refused after %v, want well under a second", addr, d)
			}
		}
		c, err := e.client.Dial("udp", "10.96.0.12:53", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := netnstest.UDP(c, "x", time.Second); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("UDP to a Service without endpoints: %v, want refused", err)
		}
	})
	t.Run("terminating endpoint gets no new connections", func(t *testing.T) {
		e.tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod1"),
			epSpec{pod: "pod2", ready: ptr.To(false), serving: ptr.To(true), terminating: ptr.To(true)}))
		e.sync(t)
		if got := e.who(t, "10.96.0.10:80", 20); got["pod1"] != 20 {
			t.Fatalf("with pod2 terminating, answers came from %v", got)
		}
		// With nothing ready, serving terminating endpoints take the traffic.
		e.tr.OnEndpointSliceUpdate(nil, testSlice("web",
			epSpec{pod: "pod2", ready: ptr.To(false), serving: ptr.To(true), terminating: ptr.To(true)},
			epSpec{pod: "pod3", ready: ptr.To(false), serving: ptr.To(false), terminating: ptr.To(true)}))
		e.sync(t)
		if got := e.who(t, "10.96.0.10:80", 10); got["pod2"] != 10 {
			t.Fatalf("fallback to serving terminating endpoints: got %v, want pod2 only", got)
		}
	})
	t.Run("established connection survives syncs that change other endpoints", func(t *testing.T) {
		e.tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod1")))
		e.sync(t)
		c, err := e.client.Dial("tcp", "10.96.0.10:80", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		e.tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod1"), readyEP("pod3")))
		e.sync(t)
		e.tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod1"), readyEP("pod2")))
		e.sync(t)
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.0\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(c)
		if err != nil || !strings.Contains(string(b), "pod1") {
			t.Fatalf("connection opened before two syncs: %q, %v", b, err)
		}
	})
	t.Run("UDP flow moves when its endpoint is replaced", func(t *testing.T) {
		e.tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod1")))
		e.sync(t)
		c, err := e.client.DialFrom("udp", ":40053", "10.96.0.10:53", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if r, err := netnstest.UDP(c, "a", time.Second); err != nil || !strings.HasPrefix(r, "pod1") {
			t.Fatalf("first reply %q, %v", r, err)
		}
		e.tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod3")))
		e.sync(t)
		if r, err := netnstest.UDP(c, "b", time.Second); err != nil || !strings.HasPrefix(r, "pod3") {
			t.Fatalf("after replacing pod1 by pod3 the same UDP flow got %q, %v (stale conntrack entry?)", r, err)
		}
	})
	t.Run("hairpin: a pod reaches itself through its Service", func(t *testing.T) {
		e.tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod1")))
		e.sync(t)
		body, err := e.w.Pods["pod1"].Get("10.96.0.10:80", 2*time.Second)
		if err != nil || body != "pod1" {
			t.Fatalf("pod1 -> its own Service: %q, %v", body, err)
		}
	})
	t.Run("from the node itself", func(t *testing.T) {
		body, err := e.w.Node.Get("10.96.0.10:80", 2*time.Second)
		if err != nil || body != "pod1" {
			t.Fatalf("node -> Service: %q, %v", body, err)
		}
	})
	t.Run("ping to a ClusterIP gets no answer", func(t *testing.T) {
		// The probe works: a pod answers.
		if ok, err := e.client.Ping("10.244.1.2", 2*time.Second); err != nil || !ok {
			t.Fatalf("ping to a pod: answered=%v, %v", ok, err)
		}
		if ok, err := e.client.Ping("10.96.0.10", time.Second); err != nil || ok {
			t.Fatalf("ping to a ClusterIP: answered=%v, %v", ok, err)
		}
	})
}

func TestKernelDriftIsRepaired(t *testing.T) {
	e := newKenv(t)
	e.tr.OnServiceAdd(testService("web", "10.96.0.10", false, httpPort))
	e.tr.OnEndpointSliceAdd(testSlice("web", readyEP("pod1")))
	e.sync(t)
	e.w.Node.MustRun(t, "nft", "delete", "element", "ip", TableName, mapServiceIPs, "{ 10.96.0.10 . tcp . 80 }")
	e.w.Node.MustRun(t, "nft", "delete", "chain", "ip", TableName, "lb-1-10")
	if _, err := e.client.Get("10.96.0.10:80", time.Second); err == nil {
		t.Fatal("service still answers after its chain was deleted")
	}
	e.p.RequestResync() // what the --sync-period timer does
	e.sync(t)
	if body, err := e.client.Get("10.96.0.10:80", 2*time.Second); err != nil || body != "pod1" {
		t.Fatalf("after resync: %q, %v", body, err)
	}
	got := nft.NormalizeListing(e.w.Node.MustRun(t, "nft", "list", "table", "ip", TableName))
	if got != e.p.Desired().Text() {
		t.Fatalf("kernel after repair differs from desired:\n%s", got)
	}
}

func TestKernelAdoptsExistingTable(t *testing.T) {
	e := newKenv(t)
	e.tr.OnServiceAdd(testService("web", "10.96.0.10", false, httpPort))
	e.tr.OnEndpointSliceAdd(testSlice("web", readyEP("pod1"), readyEP("pod2")))
	e.sync(t)
	// A second proxy (a restart) with the same inputs finds nothing to change.
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	tr.OnServiceAdd(testService("web", "10.96.0.10", false, httpPort))
	tr.OnEndpointSliceAdd(testSlice("web", readyEP("pod1"), readyEP("pod2")))
	counting := &countingKernel{Kernel: e.kernel}
	p2 := New(Config{Tracker: tr, Kernel: counting, Options: e.p.cfg.Options})
	if err := p2.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if counting.objects != 0 {
		t.Fatalf("restart rewrote %d objects of an up-to-date table", counting.objects)
	}
	if got := e.who(t, "10.96.0.10:80", 20); len(got) != 2 {
		t.Fatalf("after adoption: %v", got)
	}
}

type countingKernel struct {
	nft.Kernel
	objects int
}

func (c *countingKernel) Apply(ctx context.Context, tx *nft.Tx) error {
	c.objects += tx.Size()
	return c.Kernel.Apply(ctx, tx)
}
