//go:build e2e

package e2e

import (
	"fmt"
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
// NodePort is reached. Positive paths through worker 1 come first, so that
// worker 1's proxy is known to hold the Service when the localhost path is
// judged.
func TestNodePort(t *testing.T) {
	track(t)
	c := theCluster
	cp, w1, w2 := c.cp(), c.workers()[0], c.workers()[1]
	lbl := map[string]string{"app": "np"}
	pod(t, "np-1", w2.name, lbl, tcpPort(80))
	svc := service(t, nodePortService("np", 80, tcp, lbl))
	np := svc.Spec.Ports[0].NodePort
	waitEndpoints(t, "np", waitPods(t, lbl, 1))
	pw1 := podCaller(clientOn(w1.name))
	runPaths(t, []path{
		{name: "FromOutside", from: c.outside(), addr: hostPort(w1.ip, np), want: answered, by: "np-1"},
		{name: "FromOutsideViaControlPlane", from: c.outside(), addr: hostPort(cp.ip, np), want: answered, by: "np-1"},
		{name: "FromAnotherNode", from: nodeCaller(w2), addr: hostPort(w1.ip, np), want: answered, by: "np-1"},
		{name: "FromPodToOwnNode", from: pw1, addr: hostPort(w1.ip, np), want: answered, by: "np-1"},
		{name: "FromPodToOtherNode", from: pw1, addr: hostPort(w2.ip, np), want: answered, by: "np-1"},
		{name: "FromTheNode", from: nodeCaller(w1), addr: hostPort(w1.ip, np), want: answered, by: "np-1"},
		{name: "ViaLocalhost", from: nodeCaller(w1), addr: hostPort("127.0.0.1", np), want: localhostNodePort(c.proxyKind)},
	})
}

// TestNodePortUDP: a client outside keeps one connected UDP socket (one
// 5-tuple) to a NodePort.
func TestNodePortUDP(t *testing.T) {
	track(t)
	t.Run("EndpointReplaced", testNodePortUDPReplaced)
	t.Run("ZeroToOneEndpoint", testNodePortUDPZeroToOne)
}

// The endpoint pod is deleted; the same socket must be answered by its
// replacement (a conntrack entry left towards the old pod would black-hole
// it).
func testNodePortUDPReplaced(t *testing.T) {
	r := track(t)
	c := theCluster
	w1 := c.workers()[0]
	lbl := map[string]string{"app": "np-udp"}
	deployment(t, "np-udp", 1, lbl, 1, udpPort(5005))
	svc := service(t, nodePortService("np-udp", 5005, corev1.ProtocolUDP, lbl))
	addr := hostPort(w1.ip, svc.Spec.Ports[0].NodePort)
	first := waitPods(t, lbl, 1)[0]
	waitEndpoints(t, "np-udp", []corev1.Pod{first})
	out := c.outside()
	var conn net.Conn
	poll.Eventually(t, 30*time.Second, "UDP NodePort round trip from outside", func() (bool, string) {
		cn, err := out.udpConn(addr)
		if err != nil {
			return false, err.Error()
		}
		got, err := udpAsk(cn, 300*time.Millisecond)
		if err != nil || got != first.Name {
			cn.Close()
			return false, fmt.Sprintf("%q %v", got, err)
		}
		conn = cn
		return true, ""
	})
	defer conn.Close()
	ctx := ctxFor(t, time.Minute)
	if err := c.client.CoreV1().Pods(ns).Delete(ctx, first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	var answers []string
	poll.Eventually(t, 45*time.Second, "same UDP socket answered by the replacement", func() (bool, string) {
		got, err := udpAsk(conn, 200*time.Millisecond)
		if err == nil && (len(answers) == 0 || answers[len(answers)-1] != got) {
			answers = append(answers, got)
		}
		return err == nil && got != first.Name, fmt.Sprintf("%q %v (answers so far %v)", got, err, answers)
	})
	r.metric(t, "udp_recovery_ms", "%s", ms(time.Since(deleted)))
}

// udpZeroPort is the fixed NodePort of the 0 -> 1 scenario: the client must
// be sending before the Service exists. It is in the static band
// (30000-30085) that the API server's random allocation avoids.
const udpZeroPort = 30053

// The client sends to worker 1's NodePort before the Service exists (the
// node answers port unreachable and conntrack keeps an untranslated entry
// that every datagram refreshes), then while the Service has no endpoints,
// then an endpoint appears: the same socket must be answered within a few
// seconds of the endpoint being ready (kube-proxy #139628 and #48370: a
// stale entry black-holes such a client for as long as it keeps sending).
func testNodePortUDPZeroToOne(t *testing.T) {
	r := track(t)
	c := theCluster
	w1, w2 := c.workers()[0], c.workers()[1]
	lbl := map[string]string{"app": "np-udp0"}
	addr := hostPort(w1.ip, udpZeroPort)
	conn, err := c.outside().udpConn(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s := newSender(conn, 100*time.Millisecond)
	defer s.stop()
	time.Sleep(time.Second) // the untranslated entry is in place

	svc := nodePortService("np-udp0", 5005, corev1.ProtocolUDP, lbl)
	svc.Spec.Ports[0].NodePort = udpZeroPort
	service(t, svc)
	time.Sleep(2 * time.Second) // served as a Service without endpoints
	before := s.answers()
	// What the client's datagrams left in worker 1's conntrack table: the
	// entry a proxy must delete (or never let be made) when the endpoint
	// comes.
	ct, _ := netns.Exec(w1.netns, "conntrack", "-L", "-p", "udp", "--orig-port-dst", fmt.Sprint(udpZeroPort))
	t.Logf("worker 1's conntrack entries for port %d before the endpoint:\n%s", udpZeroPort, ct)
	r.metric(t, "entries_before", "%d", strings.Count(ct, "udp "))
	pod(t, "np-udp0-1", w2.name, lbl, udpPort(5005))
	waitEndpoints(t, "np-udp0", waitPods(t, lbl, 1))
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

// sender writes a datagram every period on a connected UDP socket and reads
// whatever comes back.
type sender struct {
	conn net.Conn
	quit chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	first   time.Time // first answer
	n       int       // answers
	refused int       // ICMP errors reported on the socket
}

func newSender(conn net.Conn, period time.Duration) *sender {
	s := &sender{conn: conn, quit: make(chan struct{})}
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
			_, err := conn.Read(buf)
			s.mu.Lock()
			switch {
			case err == nil:
				if s.n == 0 {
					s.first = time.Now()
				}
				s.n++
			case outcomeOf(err) == refused:
				s.refused++
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
