//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcproxy/svcproxy/internal/poll"
)

// peerSeen polls the endpoint behind addr until it answers and returns the
// source address it saw.
func peerSeen(t *testing.T, from caller, addr string) string {
	t.Helper()
	var got string
	poll.Eventually(t, 45*time.Second, from.name+" -> "+addr+"/clientip", func() (bool, string) {
		var err error
		got, err = from.peer(addr, 2*time.Second)
		return err == nil, errString(err)
	})
	return got
}

// sourcePreserved checks that the endpoint behind addr saw the outside
// client's own address (of addr's family) and returns it.
func sourcePreserved(t *testing.T, addr string) string {
	t.Helper()
	out := theCluster.outside()
	got := peerSeen(t, out, addr)
	if want := out.srcFor(addr); got != want {
		t.Errorf("endpoint saw %s for outside client %s: source not preserved", got, want)
	}
	return got
}

// masqueraded checks that the endpoint behind addr did not see the outside
// client's address and returns what it saw.
func masqueraded(t *testing.T, addr string) string {
	t.Helper()
	out := theCluster.outside()
	got := peerSeen(t, out, addr)
	if got == out.srcFor(addr) {
		t.Errorf("endpoint saw the outside client's own address %s: not masqueraded", got)
	}
	return got
}

// TestExternalTrafficPolicyLocal: a LoadBalancer Service with an
// externalIP, policy Local, its one endpoint on worker 2; every path in
// each family of the cluster.
func TestExternalTrafficPolicyLocal(t *testing.T) {
	track(t)
	c := theCluster
	cp, w1, w2 := c.cp(), c.workers()[0], c.workers()[1]
	lbl := map[string]string{"app": "local"}
	pod(t, "local-1", w2.name, lbl, tcpPort(80))
	s := c.bothFamilies(lbService("local", lbl))
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	s.Spec.ExternalIPs = c.each(func(f corev1.IPFamily) string { return ext(f).extIPLocal })
	svc := service(t, s)
	lbIPs := c.each(func(f corev1.IPFamily) string { return ext(f).lbIPLocal })
	setIngress(t, "local", lbIPs, make([]*corev1.LoadBalancerIPMode, len(lbIPs)))
	np, hc := svc.Spec.Ports[0].NodePort, svc.Spec.HealthCheckNodePort
	if hc == 0 {
		t.Fatal("no healthCheckNodePort allocated")
	}
	waitEndpoints(t, "local", waitPods(t, lbl, 1))
	pw1 := podCaller(clientOn(w1.name))

	t.Run("SourcePreservedNodePort", func(t *testing.T) {
		r := track(t)
		eachFamily(t, r, "peer", func(f corev1.IPFamily) string { return sourcePreserved(t, hostPort(nodeIP(w2, f), np)) })
	})
	t.Run("SourcePreservedLoadBalancer", func(t *testing.T) {
		r := track(t)
		routeVia(t, w2, lbIPs...)
		eachFamily(t, r, "peer", func(f corev1.IPFamily) string { return sourcePreserved(t, hostPort(ext(f).lbIPLocal, 80)) })
	})
	// Worker 1 has no endpoint: its pods and itself still reach the
	// Service through its external addresses (kube-proxy iptables mode
	// short-circuits them to all endpoints; nftables mode black-holed the
	// externalIP until v1.33, kube-proxy #131765).
	runFamilyPaths(t, func(f corev1.IPFamily) []path {
		e := ext(f)
		return []path{
			{name: "PodReachesLoadBalancerIP", from: pw1, addr: hostPort(e.lbIPLocal, 80), want: answered, by: "local-1"},
			{name: "PodReachesExternalIP", from: pw1, addr: hostPort(e.extIPLocal, 80), want: answered, by: "local-1"},
			{name: "PodReachesNodePort", from: pw1, addr: hostPort(nodeIP(w1, f), np), want: answered, by: "local-1"},
			{name: "NodeReachesLoadBalancerIP", from: nodeCaller(w1), addr: hostPort(e.lbIPLocal, 80), want: answered, by: "local-1"},
			{name: "NodeWithoutEndpointDropsNodePort", from: c.outside(), addr: hostPort(nodeIP(w1, f), np), want: dropped},
		}
	})
	t.Run("NodeWithoutEndpointDropsLoadBalancer", func(t *testing.T) {
		r := track(t)
		routeVia(t, w1, lbIPs...)
		eachFamily(t, r, "outcome", func(f corev1.IPFamily) string {
			return path{from: c.outside(), addr: hostPort(ext(f).lbIPLocal, 80), want: dropped}.try(t)
		})
	})
	t.Run("HealthCheckNodePort", func(t *testing.T) {
		r := track(t)
		for _, n := range []*node{w2, w1, cp} {
			want := hcAnswer{code: http.StatusServiceUnavailable}
			want.Service.Namespace, want.Service.Name = ns, "local"
			want.ServiceProxyHealthy = true
			want.weight = "0"
			if n == w2 {
				want.code, want.LocalEndpoints, want.weight = http.StatusOK, 1, "1"
			}
			// Asked on the node's address of each family: the health
			// check server listens in every family the node serves.
			eachFamily(t, r, "hc_"+n.short, func(f corev1.IPFamily) string {
				var got hcAnswer
				poll.Eventually(t, 30*time.Second, fmt.Sprintf("health check node port on %s over %s", n.name, f), func() (bool, string) {
					var err error
					got, err = healthCheck(c.outside(), fmt.Sprintf("http://%s/", hostPort(nodeIP(n, f), hc)))
					return err == nil && got == want, fmt.Sprintf("got %+v (%v), want %+v", got, err, want)
				})
				return fmt.Sprint(got.code)
			})
		}
	})
}

// hcAnswer is kube-proxy's answer on a Service's healthCheckNodePort: its
// status, X-Load-Balancing-Endpoint-Weight header and JSON body.
type hcAnswer struct {
	code    int
	weight  string
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

func healthCheck(from caller, url string) (hcAnswer, error) {
	hc := &http.Client{
		Transport: &http.Transport{DialContext: from.dialer(2 * time.Second), DisableKeepAlives: true},
		Timeout:   2 * time.Second,
	}
	var a hcAnswer
	resp, err := hc.Get(url)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return a, err
	}
	if ct, opt := resp.Header.Get("Content-Type"), resp.Header.Get("X-Content-Type-Options"); ct != "application/json" || opt != "nosniff" {
		return a, fmt.Errorf("Content-Type %q, X-Content-Type-Options %q, body %q", ct, opt, b)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, fmt.Errorf("body %q: %w", b, err)
	}
	a.code, a.weight = resp.StatusCode, resp.Header.Get("X-Load-Balancing-Endpoint-Weight")
	return a, nil
}

// TestExternalTrafficPolicyCluster: external traffic to a Cluster policy
// Service is masqueraded, whether the node it arrives at has the endpoint
// or not (kube-proxy masquerades all of it).
func TestExternalTrafficPolicyCluster(t *testing.T) {
	track(t)
	c := theCluster
	w1, w2 := c.workers()[0], c.workers()[1]
	lbl := map[string]string{"app": "cluster"}
	pod(t, "cluster-1", w2.name, lbl, tcpPort(80))
	svc := service(t, c.bothFamilies(nodePortService("cluster", 80, tcp, lbl)))
	np := svc.Spec.Ports[0].NodePort
	waitEndpoints(t, "cluster", waitPods(t, lbl, 1))
	t.Run("MasqueradedViaOtherNode", func(t *testing.T) {
		r := track(t)
		eachFamily(t, r, "peer", func(f corev1.IPFamily) string { return masqueraded(t, hostPort(nodeIP(w1, f), np)) })
	})
	t.Run("MasqueradedViaEndpointNode", func(t *testing.T) {
		r := track(t)
		eachFamily(t, r, "peer", func(f corev1.IPFamily) string { return masqueraded(t, hostPort(nodeIP(w2, f), np)) })
	})
}
