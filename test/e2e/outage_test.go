//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/test/e2e/readback"
)

// rssBoundKiB is how much a proxy's RSS may move during the outage. With
// no events to process a proxy only retries its watches; Go's GC lets the
// heap grow to twice the live heap before collecting, and a proxy of a dozen
// Services lives in a few MiB, so 20 MiB covers GC slack and arena growth
// while a leak per failed watch (a goroutine and buffers every retry, dozens
// of retries a minute per informer) or state rebuilt on every retry shows.
const rssBoundKiB = 20 * 1024

// envDuration reads a duration from the environment (for quick local runs).
func envDuration(t *testing.T, key string, def time.Duration) time.Duration {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", key, v, err)
	}
	return d
}

// TestAPIServerOutage: kube-apiserver and etcd go away for E2E_OUTAGE
// (default 60s) under steady traffic to a ClusterIP (20 new connections a
// second from a pod on another node than the endpoints). Not one may fail,
// no node may lose a rule or element of the proxy's ruleset, the proxy's RSS
// stays within rssBoundKiB, and an endpoint added right after the API
// server is back is served within a second of the write.
func TestAPIServerOutage(t *testing.T) {
	r := track(t)
	c := theCluster
	outage := envDuration(t, "E2E_OUTAGE", 60*time.Second)
	w1, w2 := c.workers()[0], c.workers()[1]
	pod(t, "outage-a", w1.name, map[string]string{"app": "outage-a"}, tcpPort(80))
	pod(t, "outage-b", w1.name, map[string]string{"app": "outage-b"}, tcpPort(80))
	a := waitPods(t, map[string]string{"app": "outage-a"}, 1)[0]
	b := waitPods(t, map[string]string{"app": "outage-b"}, 1)[0]
	svc := service(t, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "outage"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{servicePort("", 80, 80)}},
	})
	ip := svc.Spec.ClusterIP
	slice := createSlice(t, manualSlice("outage-e2e", "outage", 80, podEndpoint(a)))
	cl := clientOn(w2.name)
	expectAnswers(t, cl, ip, 80, []string{a.Name})

	before := map[string][]string{}
	for _, n := range c.nodes {
		rs, err := c.ruleset(n)
		if err != nil {
			t.Fatalf("ruleset on %s: %v", n.name, err)
		}
		before[n.name] = rs
	}
	rss := c.sampleRSS(2 * time.Second)
	loadStart := time.Now()
	load := startLoop(cl, ip, 80, 50*time.Millisecond, outage+3*time.Minute)
	defer load.finish()
	time.Sleep(2 * time.Second) // steady state before the outage

	down := time.Now()
	c.logf("outage: stopping kube-apiserver and etcd for %v", outage)
	c.stopAPI()
	time.Sleep(outage - time.Since(down))
	checkRules(t, c, before, "at the end of the outage")
	if err := c.startAPI(ctxFor(t, 2*time.Minute)); err != nil {
		t.Fatalf("API server back: %v", err)
	}
	back := time.Now()
	r.metric(t, "outage_s", "%.0f", back.Sub(down).Seconds())
	checkRules(t, c, before, "when the API server was back")

	// A change right after the API server is back: a second endpoint.
	slice.Endpoints = append(slice.Endpoints, podEndpoint(b))
	ctx := ctxFor(t, time.Minute)
	if _, err := c.client.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update slice after the outage: %v", err)
	}
	changed := time.Now()
	took, err := firstAnswer(cl, ip, 80, b.Name, changed, 2*time.Minute)
	if err != nil {
		t.Errorf("change after the outage: %v", err)
	} else {
		r.metric(t, "change_after_outage_ms", "%s", ms(took))
		if took > time.Second {
			t.Errorf("the endpoint added %v after the API server was back was served %v after the write, want within 1s", changed.Sub(back).Round(time.Millisecond), took.Round(time.Millisecond))
		}
	}
	time.Sleep(time.Second)
	load.finish()

	total, failed, first := load.count(loadStart, time.Now())
	r.metric(t, "outage_failed", "%d/%d", failed, total)
	if failed > 0 {
		t.Errorf("%d of %d connections failed across the outage (load started %v before the API server stopped, which came back %v later, change written %v after that); first: %v",
			failed, total, down.Sub(loadStart).Round(time.Millisecond), back.Sub(down).Round(time.Millisecond), changed.Sub(back).Round(time.Millisecond), first)
	}
	if total < int(outage/(50*time.Millisecond))/2 {
		t.Errorf("only %d requests in %v: the load did not run", total, outage)
	}
	r.metric(t, "rss_mib_min_max", "%s", rss.report(t, c, rssBoundKiB))

	// Leave the cluster as healthy as found: kube-controller-manager's
	// informers back off too, and the next scenario needs its controllers.
	service(t, simpleService("outage-kcm", 80, tcp, map[string]string{"app": "outage-a"}))
	poll.Eventually(t, 3*time.Minute, "kube-controller-manager back after the outage", func() (bool, string) {
		got, err := readyEndpoints(context.Background(), "outage-kcm")
		return err == nil && len(got) == 1, fmt.Sprintf("%v %v", got, err)
	})
	r.metric(t, "controllers_back_s", "%.0f", time.Since(back).Seconds())
}

// checkRules fails the test for every line of the proxy's ruleset that a
// node held before and does not hold now.
func checkRules(t *testing.T, c *cluster, before map[string][]string, when string) {
	t.Helper()
	for _, n := range c.nodes {
		now, err := c.ruleset(n)
		if err != nil {
			t.Errorf("ruleset on %s %s: %v", n.name, when, err)
			continue
		}
		if gone := readback.Removed(before[n.name], now); len(gone) > 0 {
			t.Errorf("%s, %s lost %d of %d ruleset lines, e.g.:\n%s", when, n.name, len(gone), len(before[n.name]), strings.Join(gone[:min(len(gone), 10)], "\n"))
		}
	}
}

// createSlice creates a manually managed EndpointSlice, deleted with the test.
func createSlice(t *testing.T, s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	t.Helper()
	esc := theCluster.client.DiscoveryV1().EndpointSlices(ns)
	out, err := esc.Create(ctxFor(t, 30*time.Second), s, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create slice %s: %v", s.Name, err)
	}
	t.Cleanup(func() {
		if err := esc.Delete(context.Background(), s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("delete slice %s: %v", s.Name, err)
		}
	})
	return out
}
