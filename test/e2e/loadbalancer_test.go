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

// External addresses of the scenarios: externalIPs from TEST-NET-1,
// load balancer ingress IPs from TEST-NET-2. Nothing holds them; the
// outside routes each through a node (routeVia), so only a proxy's rules
// can answer.
const (
	extIP      = "192.0.2.10"
	extIPLocal = "192.0.2.20"
	lbIP       = "198.51.100.10"
	lbIPRanges = "198.51.100.11"
	lbIPVIP    = "198.51.100.12"
	lbIPNoNP   = "198.51.100.13"
	lbIPLocal  = "198.51.100.20"
	// proxyLBIP is held by an external load balancer on the bridge (as
	// cloud-provider-kind's per-Service container is), announced with
	// ipMode: Proxy: nodes must send it there, not capture it.
	proxyLBIP = "172.18.0.250"
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

func routeVia(t *testing.T, ip string, n *node) {
	t.Helper()
	if err := theCluster.routeVia(ip, n); err != nil {
		t.Fatal(err)
	}
}

// TestExternalIP: spec.externalIPs, routed to worker 1, endpoint on worker 2.
func TestExternalIP(t *testing.T) {
	track(t)
	c := theCluster
	w1, w2 := c.workers()[0], c.workers()[1]
	lbl := map[string]string{"app": "extip"}
	pod(t, "extip-1", w2.name, lbl, tcpPort(80))
	s := simpleService("extip", 80, tcp, lbl)
	s.Spec.ExternalIPs = []string{extIP}
	service(t, s)
	waitEndpoints(t, "extip", waitPods(t, lbl, 1))
	routeVia(t, extIP, w1)
	runPaths(t, []path{
		{name: "FromOutside", from: c.outside(), addr: hostPort(extIP, 80), want: answered, by: "extip-1"},
		{name: "FromPod", from: podCaller(clientOn(w1.name)), addr: hostPort(extIP, 80), want: answered, by: "extip-1"},
		{name: "FromTheNode", from: nodeCaller(w1), addr: hostPort(extIP, 80), want: answered, by: "extip-1"},
	})
}

// TestLoadBalancer: status.loadBalancer.ingress IPs, routed to worker 1,
// endpoint on worker 2.
func TestLoadBalancer(t *testing.T) {
	track(t)
	c := theCluster
	w1, w2 := c.workers()[0], c.workers()[1]
	lbl := map[string]string{"app": "lb"}
	pod(t, "lb-1", w2.name, lbl, tcpPort(80))
	waitPods(t, lbl, 1)
	out := c.outside()

	t.Run("Ingress", func(t *testing.T) {
		track(t)
		service(t, lbService("lb", lbl))
		setIngress(t, "lb", []string{lbIP}, []*corev1.LoadBalancerIPMode{nil})
		routeVia(t, lbIP, w1)
		runPaths(t, []path{
			{name: "FromOutside", from: out, addr: hostPort(lbIP, 80), want: answered, by: "lb-1"},
			{name: "FromPod", from: podCaller(clientOn(w1.name)), addr: hostPort(lbIP, 80), want: answered, by: "lb-1"},
			{name: "FromTheNode", from: nodeCaller(w1), addr: hostPort(lbIP, 80), want: answered, by: "lb-1"},
		})
	})

	t.Run("SourceRanges", func(t *testing.T) {
		track(t)
		s := lbService("lb-ranges", lbl)
		s.Spec.LoadBalancerSourceRanges = []string{outsideIP + "/32"}
		service(t, s)
		setIngress(t, "lb-ranges", []string{lbIPRanges}, []*corev1.LoadBalancerIPMode{nil})
		routeVia(t, lbIPRanges, w1)
		runPaths(t, []path{
			{name: "AllowedSource", from: out, addr: hostPort(lbIPRanges, 80), want: answered, by: "lb-1"},
			{name: "OtherSourceDropped", from: c.outsideOther(), addr: hostPort(lbIPRanges, 80), want: dropped},
		})
	})

	t.Run("IPModeProxy", func(t *testing.T) {
		track(t)
		externalLB(t, proxyLBIP)
		service(t, lbService("lb-proxy", lbl))
		proxyMode := corev1.LoadBalancerIPModeProxy
		vip := corev1.LoadBalancerIPModeVIP
		setIngress(t, "lb-proxy", []string{lbIPVIP, proxyLBIP}, []*corev1.LoadBalancerIPMode{&vip, &proxyMode})
		pw1 := podCaller(clientOn(w1.name))
		runPaths(t, []path{
			// The VIP ingress is captured: the node holds the Service.
			{name: "VIPCapturedFromTheNode", from: nodeCaller(w1), addr: hostPort(lbIPVIP, 80), want: answered, by: "lb-1"},
			{name: "ProxyNotCapturedFromTheNode", from: nodeCaller(w1), addr: hostPort(proxyLBIP, 80), want: answered, by: externalLBName},
			{name: "ProxyNotCapturedFromPod", from: pw1, addr: hostPort(proxyLBIP, 80), want: answered, by: externalLBName},
		})
	})

	t.Run("NoNodePorts", func(t *testing.T) {
		r := track(t)
		s := lbService("lb-nonp", lbl)
		s.Spec.AllocateLoadBalancerNodePorts = ref(false)
		svc := service(t, s)
		if np := svc.Spec.Ports[0].NodePort; np != 0 {
			t.Errorf("allocateLoadBalancerNodePorts: false, but port has nodePort %d", np)
		}
		setIngress(t, "lb-nonp", []string{lbIPNoNP}, []*corev1.LoadBalancerIPMode{nil})
		routeVia(t, lbIPNoNP, w1)
		path{name: "FromOutside", from: out, addr: hostPort(lbIPNoNP, 80), want: answered, by: "lb-1"}.check(t, r)
	})
}

const externalLBName = "external-lb"

// externalLB starts a load balancer outside the cluster: a namespace on the
// bridge holding ip and answering HTTP on port 80 with externalLBName. It
// knows the pod CIDRs' nodes (a pod's connection reaches it unmasqueraded).
func externalLB(t *testing.T, ip string) {
	t.Helper()
	c := theCluster
	name := c.sideNode(t, "elb", ip)
	for _, n := range c.nodes {
		if err := netns.IP("-n", name, "route", "add", n.podCIDR, "via", n.ip); err != nil {
			t.Fatal(err)
		}
	}
	l, err := netns.Listen(name, "tcp4", net.JoinHostPort(ip, "80"))
	if err != nil {
		t.Fatal(err)
	}
	srv := echoserver.HTTPServer(externalLBName)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
}
