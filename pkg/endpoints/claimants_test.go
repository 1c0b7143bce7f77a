package endpoints

import (
	"maps"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestClaimantsOf(t *testing.T) {
	tr := NewTracker(TrackerOptions{})
	tr.OnServiceAdd(makeService("ns", "web", "10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}))
	tr.OnServiceAdd(makeService("ns", "ext", "10.96.0.11", []v1.ServicePort{tcpPort("http", 8080)}, func(s *v1.Service) {
		s.Spec.ExternalIPs = []string{"192.0.2.1"}
	}))
	tr.OnServiceAdd(makeService("ns", "np", "10.96.0.12", []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, NodePort: 30080}}, func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
	}))
	web, ext, np := ServiceKey{"ns", "web"}, ServiceKey{"ns", "ext"}, ServiceKey{"ns", "np"}
	for _, tc := range []struct {
		name string
		dest Destination
		want []ServiceKey
	}{
		{"a cluster IP, any port", Destination{Addr: addr("10.96.0.10"), Protocol: "TCP", Port: 81}, []ServiceKey{web}},
		{"an external IP on its port", Destination{Addr: addr("192.0.2.1"), Protocol: "TCP", Port: 8080}, []ServiceKey{ext}},
		{"an external IP on another port", Destination{Addr: addr("192.0.2.1"), Protocol: "TCP", Port: 80}, nil},
		{"an external IP, another protocol", Destination{Addr: addr("192.0.2.1"), Protocol: "UDP", Port: 8080}, nil},
		{"a node port on a node address", Destination{Addr: addr("172.18.0.2"), Protocol: "TCP", Port: 30080, NodeAddr: true}, []ServiceKey{np}},
		{"a node port on another address", Destination{Addr: addr("172.18.0.2"), Protocol: "TCP", Port: 30080}, nil},
		{"a pod", Destination{Addr: addr("10.244.1.5"), Protocol: "TCP", Port: 80}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[ServiceKey]struct{}{}
			tr.ClaimantsOf([]Destination{tc.dest}, got)
			keys := slices.SortedFunc(maps.Keys(got), compareServiceKeys)
			if !slices.Equal(keys, tc.want) {
				t.Errorf("claimants of %+v: %v, want %v", tc.dest, keys, tc.want)
			}
		})
	}
}
