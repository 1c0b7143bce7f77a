//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcproxy/svcproxy/internal/netns"
)

// unallocatedIPs are addresses of the service CIDRs (10.96.0.0/16,
// fd00:10:96::/112, the API server's default ServiceCIDR "kubernetes") that
// no Service of the suite asks for: high in the range, where the allocator's
// random picks are unlikely, and checked free before use.
var unallocatedIPs = map[corev1.IPFamily]string{corev1.IPv4Protocol: "10.96.250.250", corev1.IPv6Protocol: "fd00:10:96::fafa"}

// cidrDropWait is how long a dial to a dropped address is given: a drop
// shows as this timeout, a refusal well within it.
const cidrDropWait = 2 * time.Second

// TestServiceCIDRDrops: kube-proxy nftables drops new connections to an
// address of the cluster's service CIDRs that no Service holds (its
// cluster-ips-check chain, from the ServiceCIDR objects); svcproxy must do
// the same. The gateway that every node's default route leads to is given
// such an address and answers on it with a reset, as a host outside the
// cluster that happens to use the address would: without the drop a client
// is refused by it at once (the packet left the cluster); with it the dial
// times out. Checked from a pod (forward hook) and from the node (output
// hook), in every family of the cluster, beside a Service in the same CIDR
// that answers and one without endpoints that is refused at once (its
// reject comes first); then a Service created on the address answers.
func TestServiceCIDRDrops(t *testing.T) {
	r := track(t)
	c := theCluster
	w1, w2 := c.workers()[0], c.workers()[1]
	lbl := map[string]string{"app": "cidr-a"}
	pod(t, "cidr-a", w1.name, lbl, tcpPort(80))
	a := waitPods(t, lbl, 1)[0]
	web := service(t, c.bothFamilies(simpleService("cidr-web", 80, tcp, lbl)))
	empty := service(t, c.bothFamilies(simpleService("cidr-empty", 80, tcp, map[string]string{"app": "cidr-nobody"})))
	cl := clientOn(w2.name)

	var late []string
	for _, f := range c.family.ipFamilies() {
		ip := unallocatedIPs[f]
		late = append(late, ip)
		requireUnallocated(t, ip)
		c.gatewayOwns(t, ip, w2, f)
		for _, webIP := range web.Spec.ClusterIPs {
			if familyOf(webIP) == f {
				expectAnswers(t, cl, webIP, 80, []string{a.Name}) // the proxy has synced
			}
		}
		from := []struct {
			name, netns string
		}{{"pod", cl.netns}, {"node", w2.netns}}
		for _, src := range from {
			got := dialOutcome(src.netns, net.JoinHostPort(ip, "80"))
			r.metric(t, familyKey("unallocated_from_"+src.name, ip), "%s", got)
			if got != "timeout" {
				t.Errorf("%s from the %s: %s, want a timeout: the connection to an unallocated service address must be dropped, not leave the cluster", ip, src.name, got)
			}
		}
		for _, emptyIP := range empty.Spec.ClusterIPs {
			if familyOf(emptyIP) != f {
				continue
			}
			for _, src := range from {
				got := dialOutcome(src.netns, net.JoinHostPort(emptyIP, "80"))
				r.metric(t, familyKey("no_endpoints_from_"+src.name, emptyIP), "%s", got)
				if got != "refused" {
					t.Errorf("%s (Service without endpoints) from the %s: %s, want refused at once", emptyIP, src.name, got)
				}
			}
		}
	}

	// The address gets a Service: it is served, the drop does not apply.
	svc := simpleService("cidr-late", 80, tcp, lbl)
	svc.Spec.ClusterIPs = late
	svc.Spec.ClusterIP = late[0]
	svc = service(t, c.bothFamilies(svc))
	for _, ip := range svc.Spec.ClusterIPs {
		expectAnswers(t, cl, ip, 80, []string{a.Name})
	}
}

// requireUnallocated fails the test if a Service holds ip.
func requireUnallocated(t *testing.T, ip string) {
	t.Helper()
	list, err := theCluster.client.CoreV1().Services(metav1.NamespaceAll).List(ctxFor(t, 30*time.Second), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		for _, cip := range s.Spec.ClusterIPs {
			if cip == ip {
				t.Fatalf("Service %s/%s holds %s, the address this scenario needs unallocated", s.Namespace, s.Name, ip)
			}
		}
	}
}

// gatewayOwns gives the bridge namespace (every node's default gateway) the
// address ip, and a route back to n's pods, for the scenario.
func (c *cluster) gatewayOwns(t *testing.T, ip string, n *node, f corev1.IPFamily) {
	t.Helper()
	// ofFamily takes addresses, not prefixes.
	var podCIDR string
	for _, p := range n.podCIDRs {
		if pr, err := netip.ParsePrefix(p); err == nil && pr.Addr().Is6() == (f == corev1.IPv6Protocol) {
			podCIDR = p
		}
	}
	cmds := [][2][]string{
		{{"-n", c.bridgeNetns, "addr", "add", hostCIDR(ip), "dev", "lo"}, {"-n", c.bridgeNetns, "addr", "del", hostCIDR(ip), "dev", "lo"}},
		{{"-n", c.bridgeNetns, "route", "add", podCIDR, "via", nodeIP(n, f)}, {"-n", c.bridgeNetns, "route", "del", podCIDR, "via", nodeIP(n, f)}},
	}
	for _, cmd := range cmds {
		if err := netns.IP(cmd[0]...); err != nil {
			t.Fatalf("gateway: %v", err)
		}
		undo := cmd[1]
		t.Cleanup(func() {
			if err := netns.IP(undo...); err != nil {
				t.Logf("gateway cleanup: %v", err)
			}
		})
	}
}

// dialOutcome dials addr over TCP from the namespace: "connected",
// "refused", "timeout" (no answer within cidrDropWait) or the error, with
// how long a refusal took when it took long.
func dialOutcome(ns, addr string) string {
	d := net.Dialer{Timeout: cidrDropWait}
	ctx, cancel := context.WithTimeout(context.Background(), cidrDropWait)
	defer cancel()
	start := time.Now()
	conn, err := netns.Dialer(ns, d)(ctx, "tcp", addr)
	took := time.Since(start)
	switch {
	case err == nil:
		conn.Close()
		return "connected"
	case errors.Is(err, syscall.ECONNREFUSED) && took < time.Second:
		return "refused"
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("refused after %v", took.Round(time.Millisecond))
	case isTimeout(err):
		return "timeout"
	}
	return err.Error()
}
