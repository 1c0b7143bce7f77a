//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcproxy/svcproxy/internal/poll"
)

// soakTarget is one address the soak's traffic asks, and what of.
type soakTarget struct {
	swapTarget
	kind   string // tcp, udp, sticky, nodeport, nodeport-udp, lb, local, extip, typechange
	via    *node  // the node outside traffic enters by (nil: a ClusterIP from a pod)
	sticky bool   // ClientIP affinity: every answer from one caller should be one pod
}

// soakCaller is where requests come from: a client pod or the outside.
type soakCaller struct {
	name    string
	node    *node      // the client pod's node; nil for the outside
	cl      *podClient // a socket opener in the caller's namespace
	targets []soakTarget
	long    []soakTarget // long-lived connections' targets
}

// soakWorkload is what the soak serves: Services whose endpoints never
// change (all traffic goes to them), the probe Service whose endpoint the
// change probe switches, and the churn Services the slice bursts rewrite.
type soakWorkload struct {
	c        *cluster
	callers  []*soakCaller
	services []string // the stable Services' names
	typeSvc  string   // the stable Service whose type the type-change fault cycles
	probe    probeSetup
	churn    []churnSvc
}

type probeSetup struct {
	svc    string
	ips    []string // one ClusterIP per family
	slices []*discoveryv1.EndpointSlice
	pods   [2]corev1.Pod
}

type churnSvc struct {
	i int
	f corev1.IPFamily
}

// Counts per kind: 51 Services in all with the probe; each is dual-stack
// in a dual-stack cluster.
const (
	soakTCP, soakUDP, soakSticky, soakNodePort, soakNodePortUDP = 20, 8, 5, 6, 2
	soakLB, soakLocal, soakExtIP, soakChurn                     = 3, 3, 2, 20
)

// soakExt is the i-th external address of a kind in family f: ingress IPs
// from TEST-NET-2 (2001:db8:100::/64) .150 on, externalIPs from TEST-NET-1
// (2001:db8:2::/64) .150 on: above what the other scenarios use.
func soakExt(kind string, i int, f corev1.IPFamily) string {
	base := map[string][2]string{"lb": {"198.51.100.150", "2001:db8:100::150"}, "local": {"198.51.100.160", "2001:db8:100::160"},
		"extip": {"192.0.2.150", "2001:db8:2::150"}}[kind]
	a := netip.MustParseAddr(base[0])
	if f == corev1.IPv6Protocol {
		a = netip.MustParseAddr(base[1])
	}
	for range i {
		a = a.Next()
	}
	return a.String()
}

func setupSoakWorkload(t *testing.T, c *cluster) *soakWorkload {
	t.Helper()
	w1, w2 := c.workers()[0], c.workers()[1]
	w := &soakWorkload{c: c}
	// Two endpoints on each worker: every Service has a local endpoint on
	// both workers (externalTrafficPolicy Local answers there) and remote ones.
	lbl := map[string]string{"app": "soak"}
	for _, n := range []*node{w1, w2} {
		for _, x := range []string{"a", "b"} {
			pod(t, "soak-"+n.short+"-"+x, n.name, lbl, tcpPort(80), udpPort(5005))
		}
	}
	pod(t, "soak-probe-a", w1.name, map[string]string{"app": "soak-probe-a"}, tcpPort(80))
	pod(t, "soak-probe-b", w2.name, map[string]string{"app": "soak-probe-b"}, tcpPort(80))
	eps := waitPods(t, lbl, 4)

	var all []*corev1.Service
	mk := func(name string, s *corev1.Service) *corev1.Service {
		s.Name = name
		out := service(t, c.bothFamilies(s))
		all = append(all, out)
		w.services = append(w.services, name)
		return out
	}
	var pods, outside []soakTarget
	clusterIPs := func(s *corev1.Service, kind, expect string, port int32, sticky bool) {
		for _, ip := range s.Spec.ClusterIPs {
			pods = append(pods, soakTarget{swapTarget: swapTarget{svc: s.Name, expect: expect, ip: ip, port: port}, kind: kind, sticky: sticky})
		}
	}
	viaNodes := func(s *corev1.Service, kind, expect string, port int32, nodes ...*node) {
		for _, n := range nodes {
			for _, ip := range n.ips {
				outside = append(outside, soakTarget{swapTarget: swapTarget{svc: s.Name, expect: expect, ip: ip, port: port}, kind: kind, via: n})
			}
		}
	}
	for i := range soakTCP {
		clusterIPs(mk(fmt.Sprintf("soak-tcp-%02d", i), simpleService("", 80, tcp, lbl)), "tcp", answerHTTP, 80, false)
	}
	for i := range soakUDP {
		clusterIPs(mk(fmt.Sprintf("soak-udp-%02d", i), simpleService("", 5005, corev1.ProtocolUDP, lbl)), "udp", answerUDP, 5005, false)
	}
	for i := range soakSticky {
		s := simpleService("", 80, tcp, lbl)
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		clusterIPs(mk(fmt.Sprintf("soak-sticky-%02d", i), s), "sticky", answerHTTP, 80, true)
	}
	for i := range soakNodePort {
		s := mk(fmt.Sprintf("soak-np-%02d", i), nodePortService("", 80, tcp, lbl))
		clusterIPs(s, "nodeport", answerHTTP, 80, false)
		// Each through one node, the control plane (no endpoint) included.
		viaNodes(s, "nodeport", answerHTTP, s.Spec.Ports[0].NodePort, c.nodes[i%len(c.nodes)])
	}
	for i := range soakNodePortUDP {
		s := mk(fmt.Sprintf("soak-npudp-%02d", i), nodePortService("", 5005, corev1.ProtocolUDP, lbl))
		viaNodes(s, "nodeport-udp", answerUDP, s.Spec.Ports[0].NodePort, c.workers()[i%2])
	}
	for i := range soakLB {
		s := mk(fmt.Sprintf("soak-lb-%02d", i), lbService("", lbl))
		w.ingress(t, s, "lb", i, &outside)
	}
	for i := range soakLocal {
		s := lbService("", lbl)
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s = mk(fmt.Sprintf("soak-local-%02d", i), s)
		w.ingress(t, s, "local", i, &outside)
		// Both workers have local endpoints: their NodePorts answer.
		viaNodes(s, "local", answerHTTP, s.Spec.Ports[0].NodePort, w1, w2)
	}
	for i := range soakExtIP {
		s := simpleService("", 80, tcp, lbl)
		s.Spec.ExternalIPs = c.each(func(f corev1.IPFamily) string { return soakExt("extip", i, f) })
		s = mk(fmt.Sprintf("soak-extip-%02d", i), s)
		via := c.workers()[i%2]
		routeVia(t, via, s.Spec.ExternalIPs...)
		for _, ip := range s.Spec.ExternalIPs {
			outside = append(outside, soakTarget{swapTarget: swapTarget{svc: s.Name, expect: answerHTTP, ip: ip, port: 80}, kind: "extip", via: via})
		}
	}
	w.typeSvc = "soak-type"
	clusterIPs(mk(w.typeSvc, simpleService("", 80, tcp, lbl)), "typechange", answerHTTP, 80, false)
	w.setupProbe(t)
	w.setupChurn(t)
	for _, s := range all {
		waitEndpoints(t, s.Name, eps)
	}

	// Callers: the client pod on each worker asks every ClusterIP and its
	// own node's first NodePort; the outside asks node ports, ingress IPs
	// and externalIPs. Long-lived: the first TCP Services, and a NodePort.
	for _, n := range c.workers() {
		cl := clientOn(n.name)
		own := []soakTarget{}
		for _, tg := range outside {
			if tg.kind == "nodeport" && tg.via == n {
				own = append(own, tg)
			}
		}
		sc := &soakCaller{name: cl.name, node: n, cl: cl, targets: append(append([]soakTarget{}, pods...), own...)}
		sc.long = firstOfKind(pods, "tcp", 2*len(c.family.ipFamilies()))
		w.callers = append(w.callers, sc)
	}
	out := &soakCaller{name: "outside", cl: &podClient{name: "outside", netns: c.outsideNetns()}, targets: outside}
	out.long = firstOfKind(outside, "nodeport", 1)
	w.callers = append(w.callers, out)
	w.waitServed(t)
	return w
}

// waitServed asks every address once from its caller until it answers:
// the load starts when every proxy has programmed every Service, so that a
// failure under the load is never the setup's.
func (w *soakWorkload) waitServed(t *testing.T) {
	t.Helper()
	var wg sync.WaitGroup
	for _, cl := range w.callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, tg := range cl.targets {
				err := poll.Until(context.Background(), 60*time.Second, 200*time.Millisecond, func() (bool, string) {
					err := (&stream{target: tg.swapTarget, client: cl.cl}).once()
					return err == nil, errString(err)
				})
				if err != nil {
					t.Errorf("%s -> %s %s never answered: %v", cl.name, tg.svc, tg.addr(), err)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

func firstOfKind(tgs []soakTarget, kind string, n int) []soakTarget {
	var out []soakTarget
	for _, tg := range tgs {
		if tg.kind == kind && len(out) < n {
			out = append(out, tg)
		}
	}
	return out
}

// ingress gives LoadBalancer Service s its i-th ingress IP of kind in
// every family, routed from the outside through a worker (alternating).
func (w *soakWorkload) ingress(t *testing.T, s *corev1.Service, kind string, i int, outside *[]soakTarget) {
	t.Helper()
	ips := w.c.each(func(f corev1.IPFamily) string { return soakExt(kind, i, f) })
	setIngress(t, s.Name, ips, make([]*corev1.LoadBalancerIPMode, len(ips)))
	via := w.c.workers()[i%2]
	routeVia(t, via, ips...)
	for _, ip := range ips {
		*outside = append(*outside, soakTarget{swapTarget: swapTarget{svc: s.Name, expect: answerHTTP, ip: ip, port: 80}, kind: kind, via: via})
	}
}

// setupProbe makes the probe Service: selectorless, one manual slice per
// family holding one of two pods, which the change probe switches.
func (w *soakWorkload) setupProbe(t *testing.T) {
	t.Helper()
	c := w.c
	p := &w.probe
	p.svc = "soak-probe"
	p.pods[0] = waitPods(t, map[string]string{"app": "soak-probe-a"}, 1)[0]
	p.pods[1] = waitPods(t, map[string]string{"app": "soak-probe-b"}, 1)[0]
	svc := service(t, c.bothFamilies(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: p.svc},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{servicePort("", 80, 80)}},
	}))
	p.ips = svc.Spec.ClusterIPs
	for _, ip := range p.ips {
		f := familyOf(ip)
		name := "soak-probe-" + map[corev1.IPFamily]string{corev1.IPv4Protocol: "v4", corev1.IPv6Protocol: "v6"}[f]
		p.slices = append(p.slices, createSlice(t, familySlice(manualSlice(name, p.svc, 80, familyEndpoint(p.pods[0], f)), f)))
	}
	for _, ip := range p.ips {
		expectAnswers(t, clientOn(c.workers()[0].name), ip, 80, []string{p.pods[0].Name})
	}
}

// setupChurn makes the Services the slice bursts rewrite (the churn
// scenario's names and slices, unrouted endpoints: no traffic goes there).
func (w *soakWorkload) setupChurn(t *testing.T) {
	t.Helper()
	c := w.c
	ctx := ctxFor(t, 2*time.Minute)
	t.Cleanup(func() { churnCleanup(t, c.client, soakChurn) })
	for i := range soakChurn {
		f := c.churnFamily(i)
		_, err := c.client.CoreV1().Services(ns).Create(ctx, churnService(i, f), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("churn Service %d: %v", i, err)
		}
		if _, err := c.client.DiscoveryV1().EndpointSlices(ns).Create(ctx, churnSlice(i, churnEndpoints(i, 0, f), f), metav1.CreateOptions{}); err != nil {
			t.Fatalf("churn slice %d: %v", i, err)
		}
		w.churn = append(w.churn, churnSvc{i: i, f: f})
	}
}

// targetCount is how many addresses the callers ask, for the report.
func (w *soakWorkload) targetCount() (n int) {
	for _, cl := range w.callers {
		n += len(cl.targets)
	}
	return n
}
