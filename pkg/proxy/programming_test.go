package proxy

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

func stampedSlice(s *discoveryv1.EndpointSlice, at time.Time) *discoveryv1.EndpointSlice {
	s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: at.Format(time.RFC3339Nano)}
	return s
}

// histogram reads the count and sum of an observer made by NewMetrics.
func histogram(t *testing.T, o prometheus.Observer) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// The network programming latency runs from the EndpointSlice's trigger time to the
// commit of the transaction that programs it; a change whose transaction fails is
// measured when a later one commits it.
func TestProgrammingLatencyFromTriggerTime(t *testing.T) {
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	t0 := time.Now() // after the tracker started: older stamps are not measured
	clk := clocktesting.NewFakeClock(t0)
	k := nft.NewFake()
	m := NewMetrics(nil)
	p := New(Config{Tracker: tr, Kernel: k, Metrics: m, Clock: clk})

	tr.OnServiceAdd(testService("web", "10.96.0.10", false, httpPort))
	tr.OnEndpointSliceAdd(stampedSlice(testSlice("web", readyEP("pod1")), t0.Add(time.Second)))
	clk.SetTime(t0.Add(3500 * time.Millisecond)) // the informer event's time does not matter
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, sum := histogram(t, m.ProgrammingLatency); n != 1 || sum != 2.5 {
		t.Fatalf("after the first sync: %d observations, sum %v; want 1, 2.5", n, sum)
	}

	tr.OnEndpointSliceUpdate(nil, stampedSlice(testSlice("web", readyEP("pod2")), t0.Add(4*time.Second)))
	clk.SetTime(t0.Add(5 * time.Second))
	k.FailNext = 3 // the batch, then each of its owners alone: the Service and the hairpin chain (the new endpoint is in another shard)
	if err := p.Sync(t.Context()); err == nil {
		t.Fatal("sync succeeded although the kernel refused")
	}
	if n, _ := histogram(t, m.ProgrammingLatency); n != 1 {
		t.Fatalf("a failed transaction was measured: %d observations", n)
	}
	clk.SetTime(t0.Add(7 * time.Second))
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, sum := histogram(t, m.ProgrammingLatency); n != 2 || sum != 5.5 {
		t.Fatalf("after the retry: %d observations, sum %v; want 2, 5.5 (2.5 + 3)", n, sum)
	}
}

// kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy="internal"}
// counts Service ports with internalTrafficPolicy Local, endpoints, none here.
func TestNoLocalEndpointsGauge(t *testing.T) {
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	m := NewMetrics(nil)
	p := New(Config{Tracker: tr, Kernel: nft.NewFake(), Metrics: m, Options: Options{NodeName: "here"}})
	local := func(name, ip string, nodes ...string) {
		svc := testService(name, ip, false, httpPort)
		svc.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
		tr.OnServiceAdd(svc)
		var eps []epSpec
		for range nodes {
			eps = append(eps, readyEP("pod1"))
		}
		s := testSlice(name, eps...)
		for i, n := range nodes {
			s.Endpoints[i].NodeName = ptr.To(n)
		}
		tr.OnEndpointSliceAdd(s)
	}
	local("elsewhere", "10.96.0.10", "there")
	local("here", "10.96.0.11", "here")
	local("nowhere", "10.96.0.12")
	addWeb(tr, "cluster", "10.96.0.13", "pod2")
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.NoLocalEndpointsInternal); got != 1 {
		t.Errorf("internal = %v, want 1 (only the Service with endpoints elsewhere)", got)
	}
	tr.OnServiceDelete(testService("elsewhere", "10.96.0.10", false, httpPort))
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.NoLocalEndpointsInternal); got != 0 {
		t.Errorf("after deleting it: internal = %v, want 0", got)
	}
	if got := testutil.ToFloat64(m.NoLocalEndpointsExternal); got != 0 {
		t.Errorf("external = %v, want 0", got)
	}
	// externalTrafficPolicy: Local with endpoints only on another node.
	ext := externalService("ext", "10.96.0.14", v1.ServiceTypeNodePort, 30080, true)
	tr.OnServiceAdd(ext)
	s := testSlice("ext", readyEP("pod1"))
	s.Endpoints[0].NodeName = ptr.To("there")
	tr.OnEndpointSliceAdd(s)
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.NoLocalEndpointsExternal); got != 2 {
		t.Errorf("external = %v, want 2 (both ports of the Local Service)", got)
	}
}
