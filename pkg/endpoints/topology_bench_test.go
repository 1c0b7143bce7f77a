package endpoints

import (
	"fmt"
	"runtime"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// BenchmarkTrackerTopology measures the tracker's heap at 30k Services with one
// 10-endpoint slice each (300k endpoints on 100 nodes in 3 zones), without hints
// and with the hints the EndpointSlice controller writes for trafficDistribution
// PreferClose (forZones) and PreferSameNode (forZones and forNodes): interning
// keeps the hinted cases near the plain one.
//
//	go test -run X -bench TrackerTopology -benchtime 1x ./pkg/endpoints/
func BenchmarkTrackerTopology(b *testing.B) {
	const n, eps = 30000, 10
	for _, tc := range []struct {
		name       string
		zone, node bool
	}{{"none", false, false}, {"PreferClose", true, false}, {"PreferSameNode", true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			for it := 0; it < b.N; it++ {
				before := heapInUse()
				tr := NewTracker(TrackerOptions{})
				for i := 0; i < n; i++ {
					tr.OnServiceAdd(benchService(i))
					s := benchSlice(i, eps)
					for j := range s.Endpoints {
						e := &s.Endpoints[j]
						zone := fmt.Sprintf("zone-%d", (i*eps+j)%100%3)
						if tc.zone {
							e.Zone = &zone
							e.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}}
						}
						if tc.node {
							e.Hints.ForNodes = []discoveryv1.ForNode{{Name: *e.NodeName}}
						}
					}
					tr.OnEndpointSliceAdd(s)
				}
				tr.TakeChanges()
				after := heapInUse()
				b.ReportMetric(float64(after-before)/(1<<20), "heap-MiB")
				b.ReportMetric(float64(after-before)/(n*eps), "heap-B/endpoint")
				runtime.KeepAlive(tr)
			}
		})
	}
}
