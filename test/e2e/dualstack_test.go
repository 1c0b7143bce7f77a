//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcproxy/svcproxy/internal/poll"
)

// familyPolicy is one Service of TestIPFamilyPolicy: its ipFamilyPolicy and
// ipFamilies as written.
type familyPolicy struct {
	name     string
	policy   corev1.IPFamilyPolicy
	families []corev1.IPFamily
}

var familyPolicies = []familyPolicy{
	{"SingleStackIPv4", corev1.IPFamilyPolicySingleStack, []corev1.IPFamily{corev1.IPv4Protocol}},
	{"SingleStackIPv6", corev1.IPFamilyPolicySingleStack, []corev1.IPFamily{corev1.IPv6Protocol}},
	{"PreferDualStack", corev1.IPFamilyPolicyPreferDualStack, nil},
	{"RequireDualStack", corev1.IPFamilyPolicyRequireDualStack, nil},
	{"RequireDualStackIPv6First", corev1.IPFamilyPolicyRequireDualStack, []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}},
}

// wantFamilies is what the API server makes of p in a cluster of family f:
// the Service's ipFamilies (one ClusterIP each, in this order), or ok false
// when it refuses the Service (a family the cluster lacks, dual stack in a
// single-stack cluster).
func wantFamilies(f family, p familyPolicy) (fams []corev1.IPFamily, ok bool) {
	have := f.ipFamilies()
	for _, x := range p.families {
		if !slices.Contains(have, x) {
			return nil, false
		}
	}
	switch p.policy {
	case corev1.IPFamilyPolicySingleStack:
		if len(p.families) > 0 {
			return p.families[:1], true
		}
		return have[:1], true
	case corev1.IPFamilyPolicyRequireDualStack:
		if len(have) < 2 {
			return nil, false
		}
	}
	if len(p.families) == 0 {
		return have, true
	}
	out := slices.Clone(p.families)
	for _, x := range have {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out, true
}

// TestIPFamilyPolicy: one Service per ipFamilyPolicy over the same two
// dual-stack pods (one per worker). Each ClusterIP the Service gets is
// reached from a client pod and answered by both endpoints, and the
// endpoint sees a source of the ClusterIP's family: the connection reached
// an endpoint of that family (a proxy cannot translate across families).
// A policy the cluster's families cannot serve must be refused by the API
// server, and is skipped.
func TestIPFamilyPolicy(t *testing.T) {
	track(t)
	c := theCluster
	w1, w2 := c.workers()[0], c.workers()[1]
	lbl := map[string]string{"app": "families"}
	pod(t, "families-1", w1.name, lbl, tcpPort(80))
	pod(t, "families-2", w2.name, lbl, tcpPort(80))
	eps := waitPods(t, lbl, 2)
	cl := clientOn(w1.name)
	self := podIPsOf(t, cl.name)
	for _, p := range familyPolicies {
		t.Run(p.name, func(t *testing.T) {
			r := track(t)
			testFamilyPolicy(t, r, p, lbl, eps, cl, self)
		})
	}
}

func testFamilyPolicy(t *testing.T, r *result, p familyPolicy, lbl map[string]string, eps []corev1.Pod, cl *podClient, self []string) {
	c := theCluster
	s := simpleService("fam-"+strings.ToLower(p.name), 80, tcp, lbl)
	s.Spec.IPFamilyPolicy = ref(p.policy)
	s.Spec.IPFamilies = p.families
	want, ok := wantFamilies(c.family, p)
	if !ok {
		_, err := c.client.CoreV1().Services(ns).Create(ctxFor(t, 30*time.Second), s, metav1.CreateOptions{})
		if err == nil {
			_ = c.client.CoreV1().Services(ns).Delete(context.Background(), s.Name, metav1.DeleteOptions{})
			t.Fatalf("the API server accepted %s in an %s cluster", p.name, c.family)
		}
		if !apierrors.IsInvalid(err) {
			t.Fatalf("create %s: %v", s.Name, err)
		}
		t.Skipf("not servable in an %s cluster: the API server refuses it (%v)", c.family, err)
	}
	svc := service(t, s)
	r.metric(t, "cluster_ips", "%s", strings.Join(svc.Spec.ClusterIPs, ","))
	if !slices.Equal(svc.Spec.IPFamilies, want) || len(svc.Spec.ClusterIPs) != len(want) {
		t.Fatalf("%s: ipFamilies %v, ClusterIPs %v; want one ClusterIP for each of %v", p.name, svc.Spec.IPFamilies, svc.Spec.ClusterIPs, want)
	}
	// Both pods, by their address of each of the Service's families.
	var wantEps []string
	for _, e := range eps {
		for _, f := range want {
			wantEps = append(wantEps, ofFamily(podIPStrings(e), f))
		}
	}
	sort.Strings(wantEps)
	poll.Eventually(t, 60*time.Second, "endpoints of "+svc.Name+" in each family", func() (bool, string) {
		got, err := readyEndpoints(context.Background(), svc.Name)
		return err == nil && slices.Equal(got, wantEps), fmt.Sprintf("have %v want %v (%v)", got, wantEps, err)
	})
	var sources []string
	for i, ip := range svc.Spec.ClusterIPs {
		f := want[i]
		if isIPv6(ip) != (f == corev1.IPv6Protocol) {
			t.Errorf("ClusterIP %s is not %s", ip, f)
			continue
		}
		expectAnswers(t, cl, ip, 80, names(eps))
		got, err := cl.get("http://" + net.JoinHostPort(ip, "80") + "/clientip")
		if err != nil {
			t.Errorf("%s: /clientip through %s: %v", p.name, ip, err)
			continue
		}
		if isIPv6(got) != (f == corev1.IPv6Protocol) {
			t.Errorf("%s: through %s ClusterIP %s the endpoint saw source %s: not an endpoint of its family", p.name, f, ip, got)
		}
		how := "preserved"
		if got != ofFamily(self, f) {
			how = "masqueraded to " + got
		}
		sources = append(sources, fmt.Sprintf("%s %s", f, how))
	}
	r.metric(t, "sources", "%s", strings.Join(sources, ", "))
}

// podIPsOf returns the addresses of the named pod, primary first.
func podIPsOf(t *testing.T, name string) []string {
	t.Helper()
	p, err := theCluster.client.CoreV1().Pods(ns).Get(ctxFor(t, 30*time.Second), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s: %v", name, err)
	}
	return podIPStrings(*p)
}

func podIPStrings(p corev1.Pod) []string {
	var out []string
	for _, ip := range p.Status.PodIPs {
		out = append(out, ip.IP)
	}
	return out
}

// TestNodePortIPv6: a NodePort reached on the nodes' IPv6 addresses, one
// endpoint on worker 2; in a dual-stack cluster the Service is dual-stack
// and its NodePort answers on the IPv4 addresses too.
func TestNodePortIPv6(t *testing.T) {
	track(t)
	c := theCluster
	if !c.family.hasV6() {
		t.Skipf("the cluster is %s", c.family)
	}
	cp, w1, w2 := c.cp(), c.workers()[0], c.workers()[1]
	lbl := map[string]string{"app": "np6"}
	pod(t, "np6-1", w2.name, lbl, tcpPort(80))
	s := nodePortService("np6", 80, tcp, lbl)
	s.Spec.IPFamilyPolicy = ref(corev1.IPFamilyPolicyPreferDualStack)
	svc := service(t, s)
	np := svc.Spec.Ports[0].NodePort
	waitPods(t, lbl, 1)
	v6 := func(n *node) string { return ofFamily(n.ips, corev1.IPv6Protocol) }
	pw1 := podCaller(clientOn(w1.name))
	paths := []path{
		{name: "FromOutside", from: c.outside(), addr: hostPort(v6(w1), np), want: answered, by: "np6-1"},
		{name: "FromOutsideViaControlPlane", from: c.outside(), addr: hostPort(v6(cp), np), want: answered, by: "np6-1"},
		{name: "FromAnotherNode", from: nodeCaller(w2), addr: hostPort(v6(w1), np), want: answered, by: "np6-1"},
		{name: "FromPodToOtherNode", from: pw1, addr: hostPort(v6(w2), np), want: answered, by: "np6-1"},
	}
	if c.family.hasV4() {
		paths = append(paths, path{name: "IPv4FromOutside", from: c.outside(),
			addr: hostPort(ofFamily(w1.ips, corev1.IPv4Protocol), np), want: answered, by: "np6-1"})
	}
	runPaths(t, paths)
}

// TestNoEndpointsICMPv6: a UDP Service without endpoints, on its IPv6
// ClusterIP: a connected socket in a client pod must see ICMPv6 port
// unreachable (ECONNREFUSED) rather than silence; then an endpoint appears
// and a new socket is answered.
func TestNoEndpointsICMPv6(t *testing.T) {
	r := track(t)
	c := theCluster
	if !c.family.hasV6() {
		t.Skipf("the cluster is %s", c.family)
	}
	lbl := map[string]string{"app": "noep6"}
	s := simpleService("noep6", 5005, corev1.ProtocolUDP, lbl)
	s.Spec.IPFamilyPolicy = ref(corev1.IPFamilyPolicySingleStack)
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	svc := service(t, s)
	addr := net.JoinHostPort(svc.Spec.ClusterIP, "5005")
	cl := clientOn(c.workers()[0].name)
	var took time.Duration
	poll.Eventually(t, 30*time.Second, "ICMPv6 port unreachable from "+addr, func() (bool, string) {
		conn, err := cl.udpConn(addr)
		if err != nil {
			return false, err.Error()
		}
		defer conn.Close()
		start := time.Now()
		_, err = udpAsk(conn, time.Second)
		took = time.Since(start)
		return outcomeOf(err) == refused, fmt.Sprintf("%s after %v", outcomeOf(err), took)
	})
	r.metric(t, "refused_ms", "%.1f", float64(took.Microseconds())/1000)
	pod(t, "noep6-1", c.workers()[1].name, lbl, udpPort(5005))
	poll.Eventually(t, 45*time.Second, "UDP "+addr+" answered by noep6-1", func() (bool, string) {
		conn, err := cl.udpConn(addr)
		if err != nil {
			return false, err.Error()
		}
		defer conn.Close()
		got, err := udpAsk(conn, 300*time.Millisecond)
		return err == nil && got == "noep6-1", fmt.Sprintf("%q %v", got, err)
	})
}
