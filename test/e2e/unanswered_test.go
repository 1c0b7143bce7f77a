//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcproxy/svcproxy/internal/netns"
)

// TestUnansweredSYN: a client's SYN to a ClusterIP that no proxy serves yet
// (the Service carries service.kubernetes.io/service-proxy-name, which every
// proxy here leaves alone) is never answered. The label is then removed and
// the Service served; the client tries again from the same source port, as a
// client whose ephemeral ports come round does. Where the first SYN went out
// untranslated, it left a conntrack entry (SYN_SENT, unreplied) that every
// later SYN from that port follows for as long as it lives (120 s, renewed by
// each SYN), whatever the rules say: svcproxy deletes it after the sync that
// served the Service, so the port connects within unansweredBound (without
// that deletion, three dials from the port a second apart all timed out, the
// entry listed by conntrack -L in the client's node). kube-proxy nftables
// drops such SYNs before conntrack keeps an entry; the metric shows each
// proxy's time, "stuck" when the port did not connect within 20 s.
func TestUnansweredSYN(t *testing.T) {
	r := track(t)
	c := theCluster
	w1, w2 := c.workers()[0], c.workers()[1]
	lbl := map[string]string{"app": "syn-a"}
	pod(t, "syn-a", w1.name, lbl, tcpPort(80))
	a := waitPods(t, lbl, 1)[0]
	svc := service(t, c.bothFamilies(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "syn", Labels: map[string]string{proxyNameLabel: "not-this-one"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{servicePort("", 80, 80)}},
	}))
	cl := clientOn(w2.name)
	ports := map[string]int{}
	for i, ip := range svc.Spec.ClusterIPs {
		f := familyOf(ip)
		createSlice(t, familySlice(manualSlice(fmt.Sprintf("syn-e2e-%d", i), "syn", 80, familyEndpoint(a, f)), f))
		// Below the ephemeral range: no other connection of the suite uses it.
		ports[ip] = 21000 + i + 10*(os.Getpid()%100)
		if err := dialFrom(cl, ports[ip], net.JoinHostPort(ip, "80"), time.Second); err == nil {
			t.Fatalf("%s, a ClusterIP no proxy serves, answered from port %d", ip, ports[ip])
		}
	}

	svc, err := c.client.CoreV1().Services(ns).Get(ctxFor(t, 30*time.Second), "syn", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(svc.Labels, proxyNameLabel)
	if _, err := c.client.CoreV1().Services(ns).Update(ctxFor(t, 30*time.Second), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("serve the Service: %v", err)
	}
	for _, ip := range svc.Spec.ClusterIPs {
		addr := net.JoinHostPort(ip, "80")
		expectAnswers(t, cl, ip, 80, []string{a.Name}) // other ports: the proxy serves it
		served := time.Now()
		var err error
		for time.Since(served) < 20*time.Second {
			if err = dialFrom(cl, ports[ip], addr, time.Second); err == nil || !isTimeout(err) {
				break
			}
		}
		took := time.Since(served)
		outcome := fmt.Sprintf("%.1fs", took.Seconds())
		if err != nil {
			outcome = "stuck"
		}
		r.metric(t, familyKey("same_port", ip), "%s", outcome)
		if bound := unansweredBound(c.proxyKind); bound > 0 && (err != nil || took > bound) {
			t.Errorf("%s from the port whose first SYN nothing answered: connected after %v (err %v), want within %v of the Service answering elsewhere", addr, took.Round(time.Millisecond), err, bound)
		}
	}
}

// proxyNameLabel is service.kubernetes.io/service-proxy-name: a Service that
// has it belongs to another proxy.
const proxyNameLabel = "service.kubernetes.io/service-proxy-name"

// unansweredBound is how soon a port whose first SYN nothing answered must
// connect once the Service answers on other ports: svcproxy deletes the
// entry after the sync that served the Service (rate-limited to ten times the
// last dump's duration, milliseconds here), and the next dial goes through.
// 0: no bound (kube-proxy, measured only).
func unansweredBound(proxy string) time.Duration {
	if proxy == "svcproxy" {
		return 5 * time.Second
	}
	return 0
}

// dialFrom opens one TCP connection from the client pod's fixed source port.
func dialFrom(cl *podClient, port int, addr string, timeout time.Duration) error {
	d := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{Port: port}}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := netns.Dialer(cl.netns, d)(ctx, "tcp", addr)
	if err == nil {
		conn.Close()
	}
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return err != nil && (errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "i/o timeout"))
}
