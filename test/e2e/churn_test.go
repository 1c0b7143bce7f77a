//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/test/e2e/readback"
)

const churnLabel = "e2e-churn"

func envInt(t *testing.T, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", key, v)
	}
	return n
}

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// churnEndpoints is what update u of Service i writes: 1 to 3 addresses
// of family f (never routed to; no traffic goes to these Services),
// different from update u-1. IPv6 ones are in fd00:200::/64 and written
// as netip prints them, as nft lists them, so that they compare as strings.
func churnEndpoints(i, u int, f corev1.IPFamily) []string {
	var out []string
	for j := range 1 + u%3 {
		if f == corev1.IPv6Protocol {
			out = append(out, netip.MustParseAddr(fmt.Sprintf("fd00:200::%x:%x", 200+(u+j)%50, i)).String())
		} else {
			out = append(out, fmt.Sprintf("10.%d.%d.%d", 200+(u+j)%50, i/256, i%256))
		}
	}
	slices.Sort(out)
	return out
}

// churnFamily is the family of Service i: the cluster's one, or in a
// dual-stack cluster IPv4 for even i and IPv6 for odd i, so that both
// families' tables take half of the churn.
func (c *cluster) churnFamily(i int) corev1.IPFamily {
	fams := c.family.ipFamilies()
	return fams[i%len(fams)]
}

// TestEndpointSliceChurn writes E2E_CHURN_RATE (200) EndpointSlice updates
// a second for E2E_CHURN_DURATION (2m) over E2E_CHURN_SERVICES (1000)
// selectorless single-stack Services (in a dual-stack cluster half IPv4,
// half IPv6; see churnFamily), then checks that every node's kernel load
// balances each Service to exactly the endpoints of its last written
// slice. Reported: the rate reached, the proxy's programming latency
// histogram (p50/p99), a probe Service's write-to-first-answer latency
// under the churn, the time to converge after the last write, and the
// proxies' RSS.
func TestEndpointSliceChurn(t *testing.T) {
	r := track(t)
	c := theCluster
	if c.proxyKind == "kube-proxy-iptables" {
		t.Skip("reading endpoints back from iptables-save is not implemented")
	}
	nSvc := envInt(t, "E2E_CHURN_SERVICES", 1000)
	rate := envInt(t, "E2E_CHURN_RATE", 200)
	dur := envDuration(t, "E2E_CHURN_DURATION", 2*time.Minute)
	cfg := rest.CopyConfig(c.rest)
	cfg.QPS = float32(max(2*rate, 400))
	cfg.Burst = int(2 * cfg.QPS)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, dur+15*time.Minute)
	svcs := client.CoreV1().Services(ns)
	esc := client.DiscoveryV1().EndpointSlices(ns)
	t.Cleanup(func() { churnCleanup(t, client, nSvc) })

	// Services and their first slices.
	start := time.Now()
	ips := make([]string, nSvc)
	objs := make([]*discoveryv1.EndpointSlice, nSvc)
	last := make([][]string, nSvc) // endpoints of the last written slice
	if err := parallel(nSvc, 16, func(i int) error {
		f := c.churnFamily(i)
		s, err := svcs.Create(ctx, churnService(i, f), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		ips[i] = s.Spec.ClusterIP
		last[i] = churnEndpoints(i, 0, f)
		objs[i], err = esc.Create(ctx, churnSlice(i, last[i], f), metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatalf("create %d Services and slices: %v", nSvc, err)
	}
	r.metric(t, "churn_create_s", "%.1f", time.Since(start).Seconds())
	converged := func() (bool, string) { return c.churnProgrammed(ips, last) }
	if err := poll.Until(ctx, 10*time.Minute, time.Second, converged); err != nil {
		t.Fatalf("%d Services never programmed: %v", nSvc, err)
	}
	r.metric(t, "churn_initial_programmed_s", "%.1f", time.Since(start).Seconds())

	before := map[string]map[string]float64{}
	for _, n := range c.nodes {
		if before[n.name], err = c.scrape(n); err != nil {
			t.Fatal(err)
		}
	}
	rss := c.sampleRSS(2 * time.Second)
	probe := startProbe(t, c)

	// The churn: a token every 1/rate; worker w updates Services w, w+W, ...
	// in turn, so that one Service's updates never overlap.
	workers := min(32, nSvc)
	tokens := make(chan struct{}, rate)
	var sent, missed, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	churnStart := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []int
			for i := w; i < nSvc; i += workers {
				mine = append(mine, i)
			}
			u := make([]int, len(mine))
			for k := 0; ; k = (k + 1) % len(mine) {
				if _, ok := <-tokens; !ok {
					return
				}
				i := mine[k]
				eps := churnEndpoints(i, u[k]+1, c.churnFamily(i))
				s := objs[i].DeepCopy()
				s.Endpoints = churnSliceEndpoints(eps)
				// As the EndpointSlice controller does: proxies measure
				// programming latency from this stamp.
				if s.Annotations == nil {
					s.Annotations = map[string]string{}
				}
				s.Annotations[corev1.EndpointsLastChangeTriggerTime] = time.Now().UTC().Format(time.RFC3339Nano)
				out, err := esc.Update(ctx, s, metav1.UpdateOptions{})
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				objs[i], last[i] = out, eps
				u[k]++
				sent.Add(1)
			}
		}()
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for now := range tick.C {
		if now.Sub(churnStart) >= dur {
			break
		}
		select {
		case tokens <- struct{}{}:
		default:
			missed.Add(1)
		}
	}
	tick.Stop()
	close(tokens)
	wg.Wait()
	lastWrite := time.Now()
	elapsed := lastWrite.Sub(churnStart)
	probeLat := probe.finish()
	r.metric(t, "churn_updates", "%d in %.1fs (%.0f/s), %d failed, %d ticks missed", sent.Load(), elapsed.Seconds(),
		float64(sent.Load())/elapsed.Seconds(), failed.Load(), missed.Load())
	if err, _ := firstErr.Load().(error); err != nil {
		t.Errorf("%d slice updates failed; first: %v", failed.Load(), err)
	}

	if err := poll.Until(ctx, 5*time.Minute, 500*time.Millisecond, converged); err != nil {
		t.Errorf("after the churn the kernel does not hold the last written endpoints: %v", err)
	} else {
		r.metric(t, "churn_converged_ms", "%s", ms(time.Since(lastWrite)))
	}

	var lat, sync50, sync99 []string
	for _, n := range c.nodes {
		after, err := c.scrape(n)
		if err != nil {
			t.Fatal(err)
		}
		p50, cnt := readback.HistogramQuantile(before[n.name], after, "kubeproxy_network_programming_duration_seconds", 0.5)
		p99, _ := readback.HistogramQuantile(before[n.name], after, "kubeproxy_network_programming_duration_seconds", 0.99)
		lat = append(lat, fmt.Sprintf("%s p50 %.3fs p99 %.3fs (%.0f)", n.short, p50, p99, cnt))
		s50, _ := readback.HistogramQuantile(before[n.name], after, "kubeproxy_sync_proxy_rules_duration_seconds", 0.5)
		s99, scnt := readback.HistogramQuantile(before[n.name], after, "kubeproxy_sync_proxy_rules_duration_seconds", 0.99)
		sync50 = append(sync50, fmt.Sprintf("%s %.3fs", n.short, s50))
		sync99 = append(sync99, fmt.Sprintf("%s %.3fs (%.0f syncs)", n.short, s99, scnt))
	}
	r.metric(t, "churn_programming_latency", "%s", strings.Join(lat, ", "))
	r.metric(t, "churn_sync_p50", "%s", strings.Join(sync50, ", "))
	r.metric(t, "churn_sync_p99", "%s", strings.Join(sync99, ", "))
	if len(probeLat) > 0 {
		r.metric(t, "churn_probe_latency_ms", "p50 %s p99 %s max %s (%d changes)", ms(percentile(probeLat, 0.5)),
			ms(percentile(probeLat, 0.99)), ms(maxDuration(probeLat)), len(probeLat))
	}
	r.metric(t, "churn_rss_mib_min_max", "%s", rss.report(t, c, 0))
}

func churnSliceEndpoints(addrs []string) []discoveryv1.Endpoint {
	var eps []discoveryv1.Endpoint
	for _, a := range addrs {
		eps = append(eps, readyEndpoint(a, "svcproxy-worker"))
	}
	return eps
}

func churnSlice(i int, addrs []string, f corev1.IPFamily) *discoveryv1.EndpointSlice {
	s := manualSlice(fmt.Sprintf("churn-%04d", i), fmt.Sprintf("churn-%04d", i), 80, churnSliceEndpoints(addrs)...)
	s.AddressType = discoveryv1.AddressType(f) // IPv4, IPv6: the same names
	s.Labels[discoveryv1.LabelManagedBy] = "churn." + managedBy
	s.Labels[churnLabel] = "1"
	return s
}

// churnProgrammed reports whether every node's kernel holds, for each
// Service i, exactly the endpoints last[i].
func (c *cluster) churnProgrammed(ips []string, last [][]string) (bool, string) {
	for _, n := range c.nodes {
		got, err := c.kernelEndpoints(n)
		if err != nil {
			return false, err.Error()
		}
		var wrong []string
		for i := range ips {
			key := ips[i]
			if c.proxyKind != "svcproxy" {
				key = fmt.Sprintf("churn-%04d", i)
			}
			if !slices.Equal(got[key], last[i]) {
				wrong = append(wrong, fmt.Sprintf("churn-%04d has %v want %v", i, got[key], last[i]))
			}
		}
		if len(wrong) > 0 {
			return false, fmt.Sprintf("%s: %d of %d Services differ, e.g. %s", n.name, len(wrong), len(ips), strings.Join(wrong[:min(3, len(wrong))], "; "))
		}
	}
	return true, ""
}

func churnCleanup(t *testing.T, client kubernetes.Interface, nSvc int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sel := metav1.ListOptions{LabelSelector: churnLabel + "=1"}
	if err := client.DiscoveryV1().EndpointSlices(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		t.Logf("delete churn slices: %v", err)
	}
	err := parallel(nSvc, 16, func(i int) error {
		err := client.CoreV1().Services(ns).Delete(ctx, fmt.Sprintf("churn-%04d", i), metav1.DeleteOptions{})
		if err != nil && !strings.Contains(err.Error(), "not found") {
			return err
		}
		return nil
	})
	if err != nil {
		t.Logf("delete churn Services: %v", err)
	}
}

// churnService is churn Service i, a single-stack one of family f, without a
// selector: the churn writes its EndpointSlices itself.
func churnService(i int, f corev1.IPFamily) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("churn-%04d", i), Labels: map[string]string{churnLabel: "1"}},
		Spec: corev1.ServiceSpec{
			Ports:          []corev1.ServicePort{servicePort("", 80, 80)},
			IPFamilyPolicy: ref(corev1.IPFamilyPolicySingleStack),
			IPFamilies:     []corev1.IPFamily{f},
		},
	}
}
