//go:build e2e

package e2e

import (
	"context"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcproxy/svcproxy/internal/echoserver"
	"github.com/svcproxy/svcproxy/internal/netns"
)

// setIngress writes status.loadBalancer.ingress through the status
// subresource, as a cloud controller would. mode nil leaves ipMode unset
// (VIP).
func setIngress(t *testing.T, name string, ips []string, modes []*corev1.LoadBalancerIPMode) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	svcs := theCluster.client.CoreV1().Services(ns)
	cur, err := svcs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Status.LoadBalancer.Ingress = nil
	for i, ip := range ips {
		cur.Status.LoadBalancer.Ingress = append(cur.Status.LoadBalancer.Ingress,
			corev1.LoadBalancerIngress{IP: ip, IPMode: modes[i]})
	}
	if _, err := svcs.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("write ingress of %s: %v", name, err)
	}
}

func lbService(name string, selector map[string]string) *corev1.Service {
	s := simpleService(name, 80, tcp, selector)
	s.Spec.Type = corev1.ServiceTypeLoadBalancer
	return s
}

// routeVia routes each of ips through node n (its address of the
// ip's family).
func routeVia(t *testing.T, n *node, ips ...string) {
	t.Helper()
	for _, ip := range ips {
		if err := theCluster.routeVia(ip, n); err != nil {
			t.Fatal(err)
		}
	}
}

// TestExternalIP: spec.externalIPs (one per family), routed to worker 1,
// endpoint on worker 2.
func TestExternalIP(t *testing.T) {
	track(t)
	c := theCluster
	w1, w2 := c.workers()[0], c.workers()[1]
	lbl := map[string]string{"app": "extip"}
	pod(t, "extip-1", w2.name, lbl, tcpPort(80))
	s := c.bothFamilies(simpleService("extip", 80, tcp, lbl))
	s.Spec.ExternalIPs = c.each(func(f corev1.IPFamily) string { return ext(f).extIP })
	service(t, s)
	waitEndpoints(t, "extip", waitPods(t, lbl, 1))
	routeVia(t, w1, s.Spec.ExternalIPs...)
	runFamilyPaths(t, func(f corev1.IPFamily) []path {
		ip := ext(f).extIP
		return []path{
			{name: "FromOutside", from: c.outside(), addr: hostPort(ip, 80), want: answered, by: "extip-1"},
			{name: "FromPod", from: podCaller(clientOn(w1.name)), addr: hostPort(ip, 80), want: answered, by: "extip-1"},
			{name: "FromTheNode", from: nodeCaller(w1), addr: hostPort(ip, 80), want: answered, by: "extip-1"},
		}
	})
}

// TestLoadBalancer: status.loadBalancer.ingress IPs (one per family),
// routed to worker 1, endpoint on worker 2.
func TestLoadBalancer(t *testing.T) {
	track(t)
	c := theCluster
	w1, w2 := c.workers()[0], c.workers()[1]
	lbl := map[string]string{"app": "lb"}
	pod(t, "lb-1", w2.name, lbl, tcpPort(80))
	waitPods(t, lbl, 1)
	out := c.outside()
	vips := func(pick func(extAddrs) string) ([]string, []*corev1.LoadBalancerIPMode) {
		ips := c.each(func(f corev1.IPFamily) string { return pick(ext(f)) })
		return ips, make([]*corev1.LoadBalancerIPMode, len(ips))
	}

	t.Run("Ingress", func(t *testing.T) {
		track(t)
		service(t, c.bothFamilies(lbService("lb", lbl)))
		ips, modes := vips(func(e extAddrs) string { return e.lbIP })
		setIngress(t, "lb", ips, modes)
		routeVia(t, w1, ips...)
		runFamilyPaths(t, func(f corev1.IPFamily) []path {
			ip := ext(f).lbIP
			return []path{
				{name: "FromOutside", from: out, addr: hostPort(ip, 80), want: answered, by: "lb-1"},
				{name: "FromPod", from: podCaller(clientOn(w1.name)), addr: hostPort(ip, 80), want: answered, by: "lb-1"},
				{name: "FromTheNode", from: nodeCaller(w1), addr: hostPort(ip, 80), want: answered, by: "lb-1"},
			}
		})
	})

	t.Run("SourceRanges", func(t *testing.T) {
		track(t)
		s := c.bothFamilies(lbService("lb-ranges", lbl))
		s.Spec.LoadBalancerSourceRanges = c.each(func(f corev1.IPFamily) string { return hostCIDR(out.srcOf(f)) })
		service(t, s)
		ips, modes := vips(func(e extAddrs) string { return e.lbIPRanges })
		setIngress(t, "lb-ranges", ips, modes)
		routeVia(t, w1, ips...)
		runFamilyPaths(t, func(f corev1.IPFamily) []path {
			ip := ext(f).lbIPRanges
			return []path{
				{name: "AllowedSource", from: out, addr: hostPort(ip, 80), want: answered, by: "lb-1"},
				{name: "OtherSourceDropped", from: c.outsideOther(), addr: hostPort(ip, 80), want: dropped},
			}
		})
	})

	t.Run("IPModeProxy", func(t *testing.T) {
		track(t)
		proxyIPs := c.each(func(f corev1.IPFamily) string { return ext(f).proxyLB })
		externalLB(t, proxyIPs...)
		service(t, c.bothFamilies(lbService("lb-proxy", lbl)))
		proxyMode := corev1.LoadBalancerIPModeProxy
		vip := corev1.LoadBalancerIPModeVIP
		var ips []string
		var modes []*corev1.LoadBalancerIPMode
		for _, f := range c.family.ipFamilies() {
			ips = append(ips, ext(f).lbIPVIP, ext(f).proxyLB)
			modes = append(modes, &vip, &proxyMode)
		}
		setIngress(t, "lb-proxy", ips, modes)
		pw1 := podCaller(clientOn(w1.name))
		runFamilyPaths(t, func(f corev1.IPFamily) []path {
			e := ext(f)
			return []path{
				// The VIP ingress is captured: the node holds the Service.
				{name: "VIPCapturedFromTheNode", from: nodeCaller(w1), addr: hostPort(e.lbIPVIP, 80), want: answered, by: "lb-1"},
				{name: "ProxyNotCapturedFromTheNode", from: nodeCaller(w1), addr: hostPort(e.proxyLB, 80), want: answered, by: externalLBName},
				{name: "ProxyNotCapturedFromPod", from: pw1, addr: hostPort(e.proxyLB, 80), want: answered, by: externalLBName},
			}
		})
	})

	t.Run("NoNodePorts", func(t *testing.T) {
		r := track(t)
		s := c.bothFamilies(lbService("lb-nonp", lbl))
		s.Spec.AllocateLoadBalancerNodePorts = ref(false)
		svc := service(t, s)
		if np := svc.Spec.Ports[0].NodePort; np != 0 {
			t.Errorf("allocateLoadBalancerNodePorts: false, but port has nodePort %d", np)
		}
		ips, modes := vips(func(e extAddrs) string { return e.lbIPNoNP })
		setIngress(t, "lb-nonp", ips, modes)
		routeVia(t, w1, ips...)
		eachFamily(t, r, "outcome", func(f corev1.IPFamily) string {
			return path{from: out, addr: hostPort(ext(f).lbIPNoNP, 80), want: answered, by: "lb-1"}.try(t)
		})
	})
}

const externalLBName = "external-lb"

// externalLB starts a load balancer outside the cluster: a namespace on the
// bridge holding ips (one per family) and answering HTTP on port 80 with
// externalLBName. It knows the pod CIDRs' nodes (a pod's connection
// reaches it unmasqueraded).
func externalLB(t *testing.T, ips ...string) {
	t.Helper()
	c := theCluster
	name := c.sideNode(t, "elb", ips...)
	for _, n := range c.nodes {
		for _, cidr := range n.podCIDRs {
			if err := netns.IP("-n", name, "route", "add", cidr, "via", nodeIP(n, familyOf(cidr))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, ip := range ips {
		l, err := netns.Listen(name, "tcp", net.JoinHostPort(ip, "80"))
		if err != nil {
			t.Fatal(err)
		}
		srv := echoserver.HTTPServer(externalLBName)
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	}
}
