package main

import (
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcproxy/svcproxy/internal/benchshape"
)

// The objects of the default shape, "disjoint": Service i has ClusterIP addr(96, i)
// port 80 and endpoints addr(128, i*e+j) port 8080, every one of them answered by
// the pods namespace (benchworld.EndpointPf). The "shared" shape (-shape shared,
// objects_shared.go) has the same ClusterIPs and port 80.

// objects says what kind of Services the bench makes.
type objects struct {
	endpoints int
	// shape is "disjoint" (the default) or "shared" (internal/benchshape); the
	// shared shape has its own sizes, so endpoints is not used.
	shape string
	// sticky gives every Service ClientIP affinity (BENCH_STICKY=1 make bench).
	sticky bool
	// external gives a third of the Services a NodePort (BENCH_EXTERNAL=1 make bench,
	// issue 8): of every nine, one LoadBalancer with an ingress IP, two NodePort, and
	// one ClusterIP Service with an externalIP.
	external bool
	// nodes spreads the endpoints over that many nodes, as the EndpointSlice
	// controller names every pod's node: endpoint k is on node-(k mod nodes), and the
	// proxy is node-0 (benchNode). 0 names no node: every endpoint may be the proxy's.
	nodes int
}

// benchNode is the node the bench's proxies run as.
const benchNode = "node-0"

// nodeOf is the node endpoint k is on, nil when the objects name none.
func (o objects) nodeOf(k int) *string {
	if o.nodes <= 0 {
		return nil
	}
	n := "node-" + strconv.Itoa(k%o.nodes)
	return &n
}

func addr(base byte, i int) string {
	return fmt.Sprintf("10.%d.%d.%d", base+byte(i>>16), (i>>8)&0xff, i&0xff)
}

func (o objects) service(i int) *v1.Service {
	if o.shared() {
		return o.sharedService(i)
	}
	ip := addr(96, i)
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "svc-" + strconv.Itoa(i)},
		Spec: v1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}, Type: v1.ServiceTypeClusterIP,
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}},
	}
	if o.sticky {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	}
	if o.external {
		external(s, i)
	}
	return s
}

// external makes Service i one of the external kinds. NodePorts are unique: a
// third of 100k Services needs 33k of them, beyond the default 30000-32767 range
// (a cluster would set --service-node-port-range).
func external(s *v1.Service, i int) {
	outside := fmt.Sprintf("172.30.%d.%d", (i>>8)&0xff, i&0xff)
	switch {
	case i%9 == 0:
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = int32(20000 + i/3)
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: outside}}
	case i%3 == 0:
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = int32(20000 + i/3)
	case i%9 == 1:
		s.Spec.ExternalIPs = []string{outside}
	}
}

// slice returns Service i's endpoints (the shared shape: its first slice, the one a
// change writes); gen > 0 moves one endpoint to a new address. A zero trigger
// leaves the slice without the controller's trigger-time stamp.
func (o objects) slice(i, gen int, trigger time.Time) *discoveryv1.EndpointSlice {
	if o.shared() {
		return o.sharedSlice(i, 0, gen, trigger)
	}
	name, proto, port := "http", v1.ProtocolTCP, int32(8080)
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "bench", Name: "svc-" + strconv.Itoa(i) + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: "svc-" + strconv.Itoa(i)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
	}
	if !trigger.IsZero() {
		s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: trigger.Format(time.RFC3339Nano)}
	}
	for j := 0; j < o.endpoints; j++ {
		k := endpointNumber(i, j, gen, o.endpoints)
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr(128, k)}, NodeName: o.nodeOf(k)})
	}
	return s
}

// endpointNumber is the number slice gives Service i's j-th endpoint at gen
// (addr(128, k) in IPv4, endpoint6(k) in IPv6).
func endpointNumber(i, j, gen, perService int) int {
	if j == 0 && gen > 0 {
		return 1<<20 + gen*4096 + i%4096
	}
	return i*perService + j
}

// slices are all of Service i's slices, before any change.
func (o objects) slices(i int) []*discoveryv1.EndpointSlice {
	if o.shared() {
		return o.sharedSlices(i)
	}
	return []*discoveryv1.EndpointSlice{o.slice(i, 0, time.Time{})}
}

// size is Service i's number of endpoints.
func (o objects) size(i int) int {
	if o.shared() {
		return benchshape.Size(i)
	}
	return o.endpoints
}

// endpointAddr is the address of Service i's endpoint j before any change.
func (o objects) endpointAddr(i, j int) string {
	if o.shared() {
		return benchshape.Addr(benchshape.Pod(i, j)).String()
	}
	return addr(128, i*o.endpoints+j)
}
