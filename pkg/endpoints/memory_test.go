package endpoints

import (
	"fmt"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// TestTrackerMemoryPerService is issue 10's budget for the tracker: what it keeps per
// Service of one port with a slice of 10 endpoints (the shape of `make bench`) after
// the cold start's Take, measured as the live heap it holds.
func TestTrackerMemoryPerService(t *testing.T) {
	const services = 4000
	svcs := make([]*v1.Service, services)
	slices := make([]*discoveryv1.EndpointSlice, services)
	for i := range services {
		svcs[i] = makeService("bench", fmt.Sprintf("svc-%d", i), fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), []v1.ServicePort{tcpPort("", 80)})
		var eps []discoveryv1.Endpoint
		for e := range 10 {
			ep := readyEP(fmt.Sprintf("10.%d.%d.%d", 100+e, i/250, i%250+1))
			ep.NodeName = ptr(fmt.Sprintf("node-%d", e))
			eps = append(eps, ep)
		}
		slices[i] = makeSlice("bench", fmt.Sprintf("svc-%d-abcde", i), fmt.Sprintf("svc-%d", i), []discoveryv1.EndpointPort{slicePortOf("", v1.ProtocolTCP, 8080)}, eps...)
	}
	before := liveHeap()
	tr := NewTracker(TrackerOptions{})
	for i := range services {
		tr.OnServiceAdd(svcs[i])
		tr.OnEndpointSliceAdd(slices[i])
	}
	tr.Take()
	perService := float64(liveHeap()-before) / services
	runtime.KeepAlive(tr)
	runtime.KeepAlive(svcs)
	runtime.KeepAlive(slices)
	t.Logf("the tracker keeps %.0f bytes per Service", perService)
	if perService > 1450 {
		t.Errorf("the tracker keeps %.0f bytes per Service, want at most 1450 (3500 before issue 10, 2274 with a snapshot map per port, 1871 with a node name string per endpoint, 1490 with 40-byte endpoints holding pointers)", perService)
	}
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestFeedKeepsNothingPerObject: the feed hands objects on and keeps nothing of
// them; the trackers hold the keys a relist needs (feed.holders). Its own set of
// "ns/name" keys was ~60 bytes an object, 12 MB at 100k Services.
func TestFeedKeepsNothingPerObject(t *testing.T) {
	const services = 20000
	svcs := make([]*v1.Service, services)
	for i := range services {
		svcs[i] = makeService("bench", fmt.Sprintf("svc-%d", i), fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), []v1.ServicePort{tcpPort("", 80)})
	}
	f := newFeed(KindService)
	before := liveHeap()
	for _, s := range svcs {
		if err := f.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	perObject := float64(liveHeap()-before) / services
	runtime.KeepAlive(f)
	runtime.KeepAlive(svcs)
	if perObject > 4 {
		t.Errorf("the feed keeps %.1f bytes per object, want none", perObject)
	}
}
