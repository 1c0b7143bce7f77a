//go:build e2e

package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// probe switches a selectorless Service between two pods once a second and
// measures, each time, from the API write's return to the first answer of
// the new pod (a new connection every ~2 ms from the client on the other
// worker): programming latency as a client sees it, while something else
// (say, the churn) keeps the proxy busy.
type probe struct {
	once sync.Once
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	lat  []time.Duration
}

func startProbe(t *testing.T, c *cluster) *probe {
	t.Helper()
	w1, w2 := c.workers()[0], c.workers()[1]
	pod(t, "probe-a", w2.name, map[string]string{"app": "probe-a"}, tcpPort(80))
	pod(t, "probe-b", w2.name, map[string]string{"app": "probe-b"}, tcpPort(80))
	pa := waitPods(t, map[string]string{"app": "probe-a"}, 1)[0]
	pb := waitPods(t, map[string]string{"app": "probe-b"}, 1)[0]
	svc := service(t, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{servicePort("", 80, 80)}},
	})
	ip := svc.Spec.ClusterIP
	slice := createSlice(t, manualSlice("probe-e2e", "probe", 80, podEndpoint(pa)))
	cl := clientOn(w1.name)
	expectAnswers(t, cl, ip, 80, []string{pa.Name})
	p := &probe{stop: make(chan struct{}), done: make(chan struct{})}
	esc := c.client.DiscoveryV1().EndpointSlices(ns)
	t.Cleanup(func() { p.finish() })
	go func() {
		defer close(p.done)
		target := pa
		for {
			select {
			case <-p.stop:
				return
			case <-time.After(time.Second):
			}
			if target.Name == pa.Name {
				target = pb
			} else {
				target = pa
			}
			slice.Endpoints = []discoveryv1.Endpoint{podEndpoint(target)}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			out, err := esc.Update(ctx, slice, metav1.UpdateOptions{})
			cancel()
			if err != nil {
				t.Errorf("probe: update slice: %v", err)
				return
			}
			slice = out
			took, err := firstAnswer(cl, ip, 80, target.Name, time.Now(), 30*time.Second)
			if err != nil {
				t.Errorf("probe: %v", err)
				return
			}
			p.mu.Lock()
			p.lat = append(p.lat, took)
			p.mu.Unlock()
		}
	}()
	return p
}

// finish stops the probe and returns the latencies it measured.
func (p *probe) finish() []time.Duration {
	p.once.Do(func() { close(p.stop) })
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lat
}
