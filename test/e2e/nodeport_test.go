//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/internal/poll"
)

// nodePortService is simpleService of type NodePort.
func nodePortService(name string, port int32, proto corev1.Protocol, selector map[string]string) *corev1.Service {
	s := simpleService(name, port, proto, selector)
	s.Spec.Type = corev1.ServiceTypeNodePort
	return s
}

// TestNodePort: one endpoint on worker 2; its NodePort reached every way a
// NodePort is reached, on the nodes' addresses of each family. Positive
// paths through worker 1 come first, so that worker 1's proxy is known to
// hold the Service when the localhost path is judged.
func TestNodePort(t *testing.T) {
	track(t)
	c := theCluster
	cp, w1, w2 := c.cp(), c.workers()[0], c.workers()[1]
	lbl := map[string]string{"app": "np"}
	pod(t, "np-1", w2.name, lbl, tcpPort(80))
	svc := service(t, c.bothFamilies(nodePortService("np", 80, tcp, lbl)))
	np := svc.Spec.Ports[0].NodePort
	waitEndpoints(t, "np", waitPods(t, lbl, 1))
	pw1 := podCaller(clientOn(w1.name))
	runFamilyPaths(t, func(f corev1.IPFamily) []path {
		return []path{
			{name: "FromOutside", from: c.outside(), addr: hostPort(nodeIP(w1, f), np), want: answered, by: "np-1"},
			{name: "FromOutsideViaControlPlane", from: c.outside(), addr: hostPort(nodeIP(cp, f), np), want: answered, by: "np-1"},
			{name: "FromAnotherNode", from: nodeCaller(w2), addr: hostPort(nodeIP(w1, f), np), want: answered, by: "np-1"},
			{name: "FromPodToOwnNode", from: pw1, addr: hostPort(nodeIP(w1, f), np), want: answered, by: "np-1"},
			{name: "FromPodToOtherNode", from: pw1, addr: hostPort(nodeIP(w2, f), np), want: answered, by: "np-1"},
			{name: "FromTheNode", from: nodeCaller(w1), addr: hostPort(nodeIP(w1, f), np), want: answered, by: "np-1"},
			{name: "ViaLocalhost", from: nodeCaller(w1), addr: hostPort(loopback(f), np), want: localhostNodePort(c.proxyKind, f)},
		}
	})
}

// TestNodePortUDP: a client outside keeps one connected UDP socket (one
// 5-tuple) to a NodePort, on worker 1's address of the cluster's primary
// family; in a dual-stack cluster the same scenarios run again over IPv6
// (subtests ending in IPv6, single-stack IPv6 Services of their own).
func TestNodePortUDP(t *testing.T) {
	track(t)
	for i, f := range theCluster.family.ipFamilies() {
		u := udpFamily{family: f, zeroPort: udpZeroPort}
		if i > 0 {
			u = udpFamily{family: f, suffix: "-v6", test: "IPv6", zeroPort: udpZeroPort6}
		}
		t.Run("EndpointReplaced"+u.test, u.testReplaced)
		t.Run("ZeroToOneEndpoint"+u.test, u.testZeroToOne)
		t.Run("EndpointGoneAndBack"+u.test, u.testGoneAndBack)
	}
}

// udpFamily is the family the UDP NodePort scenarios run in: the primary
// one (names as ever, Services naming no family) or, in a dual-stack
// cluster, IPv6 (names and Services of its own).
type udpFamily struct {
	family   corev1.IPFamily
	suffix   string // of object names
	test     string // of subtest names
	zeroPort int32
}

// service is a UDP NodePort Service of u's family.
func (u udpFamily) service(name string, selector map[string]string) *corev1.Service {
	s := nodePortService(name, 5005, corev1.ProtocolUDP, selector)
	if u.suffix != "" {
		s.Spec.IPFamilyPolicy = ref(corev1.IPFamilyPolicySingleStack)
		s.Spec.IPFamilies = []corev1.IPFamily{u.family}
	}
	return s
}

// The endpoint pod is deleted; the same socket must be answered by its
// replacement (a conntrack entry left towards the old pod would black-hole
// it).
func (u udpFamily) testReplaced(t *testing.T) {
	r := track(t)
	c := theCluster
	w1 := c.workers()[0]
	name := "np-udp" + u.suffix
	lbl := map[string]string{"app": name}
	deployment(t, name, 1, lbl, 1, udpPort(5005))
	svc := service(t, u.service(name, lbl))
	addr := hostPort(nodeIP(w1, u.family), svc.Spec.Ports[0].NodePort)
	first := waitPods(t, lbl, 1)[0]
	waitEndpoints(t, name, []corev1.Pod{first})
	conn := udpAnsweredBy(t, c.outside(), addr, first.Name)
	defer conn.Close()
	ctx := ctxFor(t, time.Minute)
	if err := c.client.CoreV1().Pods(ns).Delete(ctx, first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	awaitOtherAnswer(t, conn, first.Name)
	r.metric(t, "udp_recovery_ms", "%s", ms(time.Since(deleted)))
}

// udpZeroPort is the fixed NodePort of the 0 -> 1 scenario: the client must
// be sending before the Service exists. It is in the static band
// (30000-30085) that the API server's random allocation avoids.
const udpZeroPort = 30053

// udpZeroPort6 is udpZeroPort of the IPv6 run in a dual-stack cluster.
const udpZeroPort6 = 30054

// The client sends to worker 1's NodePort before the Service exists (the
// node answers port unreachable and conntrack keeps an untranslated entry
// that every datagram refreshes), then while the Service has no endpoints,
// then an endpoint appears: the same socket must be answered within a few
// seconds of the endpoint being ready (kube-proxy #139628 and #48370: a
// stale entry black-holes such a client for as long as it keeps sending).
func (u udpFamily) testZeroToOne(t *testing.T) {
	r := track(t)
	c := theCluster
	w1, w2 := c.workers()[0], c.workers()[1]
	name := "np-udp0" + u.suffix
	lbl := map[string]string{"app": name}
	addr := hostPort(nodeIP(w1, u.family), u.zeroPort)
	conn, err := c.outside().udpConn(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s := newSender(conn, 100*time.Millisecond)
	defer s.stop()
	time.Sleep(time.Second) // the untranslated entry is in place

	svc := u.service(name, lbl)
	svc.Spec.Ports[0].NodePort = u.zeroPort
	service(t, svc)
	time.Sleep(2 * time.Second) // served as a Service without endpoints
	before := s.answers()
	// What the client's datagrams left in worker 1's conntrack table: the
	// entry a proxy must delete (or never let be made) when the endpoint
	// comes.
	ct, _ := netns.Exec(w1.netns, append([]string{"conntrack", "-L", "-p", "udp", "--orig-port-dst", fmt.Sprint(u.zeroPort)}, conntrackFamily(addr)...)...)
	t.Logf("worker 1's conntrack entries for port %d before the endpoint:\n%s", u.zeroPort, ct)
	r.metric(t, "entries_before", "%d", strings.Count(ct, "udp "))
	pod(t, name+"-1", w2.name, lbl, udpPort(5005))
	waitEndpoints(t, name, waitPods(t, lbl, 1))
	ready := time.Now()
	var first time.Time
	poll.Eventually(t, 30*time.Second, "the sending client answered by the new endpoint", func() (bool, string) {
		first = s.firstAnswer()
		return !first.IsZero(), fmt.Sprintf("refused %d times, no answer", s.refusals())
	})
	after := first.Sub(ready)
	r.metric(t, "answered_after_ready_ms", "%s", ms(max(after, 0)))
	if before > 0 {
		t.Errorf("answered %d times before the Service had an endpoint", before)
	}
	if after > 5*time.Second {
		t.Errorf("first answer %v after the endpoint was ready: the client was black-holed", after)
	}
}

// The Service's only endpoint goes and a new pod comes (1 -> 0 -> 1) while an
// outside client keeps sending on one socket. With no endpoint svcproxy
// refuses its datagrams (ICMP port unreachable, the reject of a Service
// without endpoints) instead of letting a conntrack entry send them after the
// deleted pod; kube-proxy keeps that entry (udpNodePortWithoutEndpoints). The
// new pod must answer the same socket within a few seconds of being ready
// (the flow's entries deleted, none left untranslated meanwhile).
func (u udpFamily) testGoneAndBack(t *testing.T) {
	r := track(t)
	c := theCluster
	w1, w2 := c.workers()[0], c.workers()[1]
	name := "np-udp101" + u.suffix
	lbl := map[string]string{"app": name}
	pod(t, name+"-a", w2.name, lbl, udpPort(5005))
	svc := service(t, u.service(name, lbl))
	addr := hostPort(nodeIP(w1, u.family), svc.Spec.Ports[0].NodePort)
	first := waitPods(t, lbl, 1)[0]
	waitEndpoints(t, name, []corev1.Pod{first})
	conn := udpAnsweredBy(t, c.outside(), addr, first.Name)
	defer conn.Close()
	s := newSender(conn, 100*time.Millisecond)
	defer s.stop()

	if err := c.client.CoreV1().Pods(ns).Delete(ctxFor(t, time.Minute), first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPods(t, lbl, 0) // gone, not only terminating: nothing may serve
	waitEndpoints(t, name, nil)
	empty := time.Now()
	refusedBefore, answersBefore := s.refusals(), s.answers()
	// Up to 10 s for the first ICMP port unreachable: the proxy syncs after
	// the endpoint went, and the node sends at most about one ICMP error a
	// second (net.ipv4.icmp_ratelimit).
	var refusedAfter time.Duration
	_ = poll.Until(ctxFor(t, 15*time.Second), 10*time.Second, 50*time.Millisecond, func() (bool, string) {
		refusedAfter = time.Since(empty)
		return s.refusals() > refusedBefore, ""
	})
	ct, _ := netns.Exec(w1.netns, append([]string{"conntrack", "-L", "-p", "udp", "--orig-port-dst", fmt.Sprint(svc.Spec.Ports[0].NodePort)}, conntrackFamily(addr)...)...)
	t.Logf("worker 1's conntrack entries for the NodePort without an endpoint:\n%s", ct)
	refusals, answers := s.refusals()-refusedBefore, s.answers()-answersBefore
	got := dropped
	if refusals > 0 {
		got = refused
		r.metric(t, "first_refused_after_ms", "%s", ms(refusedAfter))
	}
	r.metric(t, "while_none", "%s", got)
	r.metric(t, "other_errors", "%v", s.otherErrors())
	if answers != 0 {
		t.Errorf("answered %d times while the Service had no endpoint", answers)
	}
	if want := udpNodePortWithoutEndpoints(c.proxyKind); got != want {
		t.Errorf("without an endpoint the client's datagrams were %s for %v, want %s", got, refusedAfter.Round(time.Millisecond), want)
	}

	pod(t, name+"-b", w2.name, lbl, udpPort(5005))
	next := waitPods(t, lbl, 1)
	waitEndpoints(t, name, next)
	ready := time.Now()
	var answered time.Time
	poll.Eventually(t, 30*time.Second, "the same socket answered by the new pod", func() (bool, string) {
		answered = s.firstAnswerBy(next[0].Name)
		return !answered.IsZero(), fmt.Sprintf("refused %d times, no answer from %s", s.refusals(), next[0].Name)
	})
	after := answered.Sub(ready)
	r.metric(t, "answered_after_ready_ms", "%s", ms(max(after, 0)))
	if after > 5*time.Second {
		t.Errorf("first answer %v after the new endpoint was ready: the client was black-holed", after)
	}
}

// sender writes a datagram every period on a connected UDP socket and reads
// whatever comes back.
type sender struct {
	conn net.Conn
	quit chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	first   time.Time            // first answer
	n       int                  // answers
	refused int                  // ICMP errors reported on the socket
	by      map[string]time.Time // each answering pod's first answer
	other   map[string]int       // other read errors, by outcome
}

func newSender(conn net.Conn, period time.Duration) *sender {
	s := &sender{conn: conn, quit: make(chan struct{}), by: map[string]time.Time{}, other: map[string]int{}}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			_, _ = conn.Write([]byte("who\n"))
			select {
			case <-s.quit:
				return
			case <-tick.C:
			}
		}
	}()
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 512)
		for {
			select {
			case <-s.quit:
				return
			default:
			}
			_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			n, err := conn.Read(buf)
			s.mu.Lock()
			switch {
			case err == nil:
				if s.n == 0 {
					s.first = time.Now()
				}
				s.n++
				// Pods echo "NAME MESSAGE".
				if pod, _, _ := strings.Cut(strings.TrimSpace(string(buf[:n])), " "); s.by[pod].IsZero() {
					s.by[pod] = time.Now()
				}
			case outcomeOf(err) == refused:
				s.refused++
			case outcomeOf(err) != dropped:
				s.other[outcomeOf(err)]++
			}
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *sender) stop() { close(s.quit); s.wg.Wait() }

func (s *sender) answers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *sender) refusals() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

func (s *sender) firstAnswer() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first
}

// firstAnswerBy is when pod first answered; zero if it has not.
func (s *sender) firstAnswerBy(pod string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.by[pod]
}

// otherErrors counts the read errors other than refusals and timeouts.
func (s *sender) otherErrors() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.other)
}
