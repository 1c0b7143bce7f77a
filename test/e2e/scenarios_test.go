//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcproxy/svcproxy/internal/poll"
)

const tcp = corev1.ProtocolTCP

// Scenario 1: the seed walk-through (kubernetes.io "Connecting Applications
// with Services"): create, scale up, replace a pod, scale down.
func TestSeedWalkthrough(t *testing.T) {
	track(t)
	c := theCluster
	lbl := map[string]string{"run": "my-nginx"}
	deployment(t, "my-nginx", 2, lbl, 2, tcpPort(80))
	svc := service(t, simpleService("my-nginx", 80, tcp, lbl))
	ip := svc.Spec.ClusterIP
	cl := clientOn(c.workers()[0].name)

	two := waitPods(t, lbl, 2)
	expectAnswers(t, cl, ip, 80, names(two))

	scale(t, "my-nginx", 3)
	three := waitPods(t, lbl, 3)
	expectAnswers(t, cl, ip, 80, names(three))

	// Delete one pod gracefully: while it terminates (and still serves) it
	// gets no new connections; its replacement does.
	victim := three[0]
	grace := int64(20)
	ctx := ctxFor(t, 2*time.Minute)
	if err := c.client.CoreV1().Pods(ns).Delete(ctx, victim.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatalf("delete %s: %v", victim.Name, err)
	}
	deleted := time.Now()
	var replacement string
	poll.Eventually(t, 60*time.Second, "replacement pod ready", func() (bool, string) {
		ps, err := pods(ctx, lbl)
		if err != nil {
			return false, err.Error()
		}
		for i := range ps {
			if isReady(&ps[i]) && !slices.Contains(names(three), ps[i].Name) {
				replacement = ps[i].Name
				return true, ""
			}
		}
		return false, fmt.Sprintf("pods %v", names(ps))
	})
	expectAnswers(t, cl, ip, 80, []string{replacement})
	window, err := tally(cl, ip, 80, 40)
	if err != nil {
		t.Errorf("requests during termination: %v (answers %v)", err, window)
	}
	if window[victim.Name] > 0 {
		t.Errorf("terminating pod %s got %d of 40 new connections: %v", victim.Name, window[victim.Name], window)
	}
	if got, err := cl.hit(victim.Status.PodIP, 80); err != nil || got != victim.Name {
		t.Errorf("terminating pod %s should still serve directly: %q, %v", victim.Name, got, err)
	}
	still, err := c.client.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
	if err != nil || still.DeletionTimestamp == nil {
		t.Errorf("pod %s stopped terminating before the check ended (%v after delete): %v", victim.Name, time.Since(deleted), err)
	}
	t.Logf("while %s terminated: %v", victim.Name, window)
	now, err := c.client.CoreV1().Services(ns).Get(ctx, "my-nginx", metav1.GetOptions{})
	if err != nil || now.Spec.ClusterIP != ip {
		t.Fatalf("ClusterIP changed: %s -> %v (%v)", ip, now, err)
	}

	// Scale to one: a client on the other node still gets answers.
	scale(t, "my-nginx", 1)
	one := waitPods(t, lbl, 1)
	other := clientNotOn(one[0].Spec.NodeName)
	expectAnswers(t, other, ip, 80, names(one))
	got, err := tally(other, ip, 80, 10)
	if err != nil || got[one[0].Name] != 10 {
		t.Errorf("cross-node from %s: %v, %v", other.name, got, err)
	}
}

// Scenario 2: ClientIP affinity sticks; switching it off spreads again.
func TestSessionAffinity(t *testing.T) {
	track(t)
	c := theCluster
	lbl := map[string]string{"app": "sticky"}
	deployment(t, "sticky", 3, lbl, 1, tcpPort(80))
	s := simpleService("sticky", 80, tcp, lbl)
	s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	svc := service(t, s)
	ip := svc.Spec.ClusterIP
	cl := clientOn(c.workers()[0].name)
	ps := waitPods(t, lbl, 3)
	waitEndpoints(t, "sticky", ps)
	poll.Eventually(t, 30*time.Second, "sticky served", func() (bool, string) {
		_, err := cl.hit(ip, 80)
		return err == nil, fmt.Sprint(err)
	})
	got, err := tally(cl, ip, 80, 30)
	if err != nil || len(got) != 1 {
		t.Fatalf("with ClientIP affinity all 30 requests should reach one pod: %v, %v", got, err)
	}
	t.Logf("affinity on: %v", got)

	ctx := ctxFor(t, time.Minute)
	cur, err := c.client.CoreV1().Services(ns).Get(ctx, "sticky", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.SessionAffinity = corev1.ServiceAffinityNone
	cur.Spec.SessionAffinityConfig = nil
	if _, err := c.client.CoreV1().Services(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 30*time.Second, "spread after affinity off", func() (bool, string) {
		got, err := tally(cl, ip, 80, 20)
		delete(got, "")
		return err == nil && len(got) >= 2, fmt.Sprintf("%v %v", got, err)
	})
}

// Scenario 3: headless and ExternalName Services get no rules; a normal
// Service beside them keeps working.
func TestHeadlessAndExternalName(t *testing.T) {
	r := track(t)
	c := theCluster
	lbl := map[string]string{"app": "hl"}
	deployment(t, "hl", 1, lbl, 1, tcpPort(80))
	headless := simpleService("e2e-headless", 80, tcp, lbl)
	headless.Spec.ClusterIP = corev1.ClusterIPNone
	service(t, headless)
	service(t, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-extname"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "svcproxy-e2e.invalid"},
	})
	normal := service(t, simpleService("hl-normal", 80, tcp, lbl))
	ps := waitPods(t, lbl, 1)
	waitEndpoints(t, "e2e-headless", ps)
	cl := clientOn(c.workers()[0].name)
	expectAnswers(t, cl, normal.Spec.ClusterIP, 80, names(ps))
	// The proxies saw the headless and ExternalName Services before the
	// normal one (one informer, in order), so their rules are in place.
	// The check is by name; it only means something where the rules name
	// Services (kube-proxy's do), so record whether they do.
	named := true
	for _, n := range c.nodes {
		rules := c.rules(n)
		named = named && strings.Contains(rules, "hl-normal")
		for _, bad := range []string{"e2e-headless", "e2e-extname", "svcproxy-e2e.invalid"} {
			if strings.Contains(rules, bad) {
				t.Errorf("node %s has rules for %s:\n%s", n.name, bad, grepLines(rules, bad))
			}
		}
	}
	if named {
		r.metric(t, "rules_name_services", "yes")
	} else {
		r.metric(t, "rules_name_services", "no")
		t.Logf("the rules do not name Service %s/hl-normal: the by-name check cannot see rules for headless/ExternalName Services", ns)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Scenario 4: a Service with no endpoints is refused fast; when an endpoint
// appears it is served.
func TestNoEndpointsRefused(t *testing.T) {
	r := track(t)
	c := theCluster
	lbl := map[string]string{"app": "noep"}
	svc := service(t, simpleService("noep", 80, tcp, lbl))
	addr := net.JoinHostPort(svc.Spec.ClusterIP, "80")
	cl := clientOn(c.workers()[0].name)
	var took time.Duration
	bound := refusalBound(c.proxyKind, isIPv6(svc.Spec.ClusterIP))
	poll.Eventually(t, 30*time.Second, "connection refused", func() (bool, string) {
		start := time.Now()
		err := cl.dialTCP(addr, 3*time.Second)
		took = time.Since(start)
		return errors.Is(err, syscall.ECONNREFUSED) && took < bound, fmt.Sprintf("%v after %v", err, took)
	})
	r.metric(t, "refused_ms", "%.1f", float64(took.Microseconds())/1000)
	pod(t, "noep-1", c.workers()[1].name, lbl, tcpPort(80))
	expectAnswers(t, cl, svc.Spec.ClusterIP, 80, []string{"noep-1"})
}

// Scenario 5: the kubernetes Service reaches the API server from a pod.
func TestKubernetesService(t *testing.T) {
	track(t)
	for _, n := range theCluster.workers() {
		cl := clientOn(n.name)
		var body string
		poll.Eventually(t, 30*time.Second, "https://"+kubernetesIP+"/version from "+cl.name, func() (bool, string) {
			var err error
			body, err = cl.get("https://" + net.JoinHostPort(kubernetesIP, "443") + "/version")
			return err == nil, fmt.Sprint(err)
		})
		if !strings.Contains(body, k8sVersion) {
			t.Errorf("unexpected /version from %s: %s", cl.name, body)
		}
	}
}

// Scenario 6: UDP round trip; a client keeps talking on the same socket
// after its endpoint is replaced (no stale conntrack entry black-holes it).
func TestUDP(t *testing.T) {
	r := track(t)
	c := theCluster
	lbl := map[string]string{"app": "udp-echo"}
	deployment(t, "udp-echo", 1, lbl, 1, udpPort(5005))
	svc := service(t, simpleService("udp-echo", 5005, corev1.ProtocolUDP, lbl))
	addr := net.JoinHostPort(svc.Spec.ClusterIP, "5005")
	cl := clientOn(c.workers()[0].name)
	first := waitPods(t, lbl, 1)[0]
	waitEndpoints(t, "udp-echo", []corev1.Pod{first})

	conn := udpAnsweredBy(t, cl, addr, first.Name)
	defer conn.Close()
	t.Logf("UDP %s answered by %s from %s", addr, first.Name, conn.LocalAddr())

	ctx := ctxFor(t, time.Minute)
	if err := c.client.CoreV1().Pods(ns).Delete(ctx, first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	awaitOtherAnswer(t, conn, first.Name)
	r.metric(t, "udp_recovery_ms", "%s", ms(time.Since(deleted)))
}

// Scenario 7: kill -9 the proxy on the client's node and start it again
// under a steady request loop; count failed requests. Twice: once started
// again at once, once after the Service gained an endpoint while the proxy
// was down (the restarted proxy must reconcile the rules it left behind).
func TestProxyRestart(t *testing.T) {
	r := track(t)
	c := theCluster
	lbl := map[string]string{"app": "restart"}
	deployment(t, "restart", 2, lbl, 1, tcpPort(80))
	svc := service(t, simpleService("restart", 80, tcp, lbl))
	ip := svc.Spec.ClusterIP
	n := c.workers()[0]
	cl := clientOn(n.name)
	ps := waitPods(t, lbl, 2)
	waitEndpoints(t, "restart", ps)
	expectAnswers(t, cl, ip, 80, names(ps))

	loop := startLoop(cl, ip, 80, 10*time.Millisecond, 2*time.Minute)
	defer loop.finish()
	time.Sleep(time.Second) // steady state before the kill

	// 1. Kill and start again at once.
	killed := time.Now()
	c.killProxy(n)
	if err := c.startProxy(n); err != nil {
		t.Fatalf("start proxy: %v", err)
	}
	if err := c.waitProxyHealthy(context.Background(), n, 60*time.Second); err != nil {
		t.Fatalf("proxy not healthy after restart: %v", err)
	}
	r.metric(t, "restart_healthy_ms", "%s", ms(time.Since(killed)))
	time.Sleep(3 * time.Second) // steady state after the restart
	total, failed, first := loop.count(killed, time.Now())
	r.metric(t, "restart_failed", "%d/%d", failed, total)
	if failed > 0 {
		t.Errorf("%d of %d requests failed across a proxy restart; first: %v", failed, total, first)
	}

	// 2. Kill, gain an endpoint while down, start again.
	killed = time.Now()
	c.killProxy(n)
	scale(t, "restart", 3)
	three := waitPods(t, lbl, 3)
	waitEndpoints(t, "restart", three)
	if err := c.startProxy(n); err != nil {
		t.Fatalf("start proxy: %v", err)
	}
	if err := c.waitProxyHealthy(context.Background(), n, 60*time.Second); err != nil {
		t.Fatalf("proxy not healthy after restart: %v", err)
	}
	expectAnswers(t, cl, ip, 80, names(three))
	time.Sleep(time.Second)
	total, failed, first = loop.count(killed, time.Now())
	r.metric(t, "restart_changed_failed", "%d/%d", failed, total)
	if failed > 0 {
		t.Errorf("%d of %d requests failed across a proxy restart with a change while down; first: %v", failed, total, first)
	}
}

// loop sends a request (a new connection) every ~every from a client pod
// until finished or for at most limit, and remembers every outcome.
type loop struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	out  []outcome
}

type outcome struct {
	at  time.Time
	err error
}

func startLoop(cl *podClient, ip string, port int32, every, limit time.Duration) *loop {
	l := &loop{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		deadline := time.After(limit)
		for {
			select {
			case <-l.stop:
				return
			case <-deadline:
				return
			default:
			}
			start := time.Now()
			_, err := cl.hit(ip, port)
			l.mu.Lock()
			l.out = append(l.out, outcome{start, err})
			l.mu.Unlock()
			time.Sleep(every - min(every, time.Since(start)))
		}
	}()
	return l
}

// count returns the requests started in [from, to), how many failed and the
// first failure.
func (l *loop) count(from, to time.Time) (total, failed int, first error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, o := range l.out {
		if o.at.Before(from) || !o.at.Before(to) {
			continue
		}
		total++
		if o.err != nil {
			failed++
			if first == nil {
				first = fmt.Errorf("%v after the start: %w", o.at.Sub(from).Round(time.Millisecond), o.err)
			}
		}
	}
	return total, failed, first
}

func (l *loop) finish() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// Scenario 8: programming latency, from an EndpointSlice change (the API
// write returned) to the first request served by the new endpoint.
func TestProgrammingLatency(t *testing.T) {
	r := track(t)
	c := theCluster
	w2 := c.workers()[1]
	pod(t, "lat-a", w2.name, map[string]string{"app": "lat-a"}, tcpPort(80))
	pod(t, "lat-b", w2.name, map[string]string{"app": "lat-b"}, tcpPort(80))
	a := waitPods(t, map[string]string{"app": "lat-a"}, 1)[0]
	b := waitPods(t, map[string]string{"app": "lat-b"}, 1)[0]
	svc := service(t, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "latency"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{servicePort("", 80, 80)}},
	})
	ip := svc.Spec.ClusterIP
	cl := clientOn(c.workers()[0].name)
	ctx := ctxFor(t, 3*time.Minute)
	esc := c.client.DiscoveryV1().EndpointSlices(ns)
	slice := manualSlice("latency-e2e", "latency", 80)
	setEndpoint := func(p corev1.Pod) { slice.Endpoints = []discoveryv1.Endpoint{podEndpoint(p)} }
	setEndpoint(a)
	slice = createSlice(t, slice)
	expectAnswers(t, cl, ip, 80, []string{a.Name})

	var lat []time.Duration
	target := a
	for i := range 6 {
		if target.Name == a.Name {
			target = b
		} else {
			target = a
		}
		// Isolated changes: kube-proxy's default --min-sync-period=1s
		// would otherwise add to back-to-back changes.
		time.Sleep(1500 * time.Millisecond)
		setEndpoint(target)
		updated, err := esc.Update(ctx, slice, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("update slice: %v", err)
		}
		changed := time.Now()
		slice = updated
		took, err := firstAnswer(cl, ip, 80, target.Name, changed, 30*time.Second)
		if err != nil {
			t.Fatalf("change %d: %v", i, err)
		}
		lat = append(lat, took)
		got, err := tally(cl, ip, 80, 5)
		if err != nil || got[target.Name] != 5 {
			t.Errorf("change %d: after the first answer from %s, got %v %v", i, target.Name, got, err)
		}
	}
	r.metric(t, "latency_p50_ms", "%s", ms(percentile(lat, 0.5)))
	r.metric(t, "latency_max_ms", "%s", ms(maxDuration(lat)))
	r.metric(t, "latency_all_ms", "%s", msList(lat))
}

func maxDuration(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}
