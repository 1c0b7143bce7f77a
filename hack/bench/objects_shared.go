package main

import (
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcproxy/svcproxy/internal/benchshape"
)

// The shared shape (-shape shared, BENCH_SHAPE=shared make bench; issue 22): the
// distribution is internal/benchshape's, which the side by side's objects share.
// Service i keeps the default shape's name and ClusterIP; its slices are
// svc-i-x, svc-i-x1, ... of at most 100 endpoints each. A change (gen > 0) replaces
// endpoint 0, in the first slice, by a pod that three other Services share.

const (
	shapeDisjoint = "disjoint"
	shapeShared   = "shared"
)

func (o objects) shared() bool { return o.shape == shapeShared }

func checkShape(shape string) error {
	if shape != shapeDisjoint && shape != shapeShared {
		return fmt.Errorf("-shape %q: want %s or %s", shape, shapeDisjoint, shapeShared)
	}
	return nil
}

func (o objects) sharedService(i int) *v1.Service {
	ip := addr(96, i)
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "svc-" + strconv.Itoa(i)},
		Spec:       v1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}},
	}
	benchshape.Expose(s, i)
	if o.sticky {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	}
	return s
}

// sharedSlice is slice k of Service i at gen.
func (o objects) sharedSlice(i, k, gen int, trigger time.Time) *discoveryv1.EndpointSlice {
	name := "svc-" + strconv.Itoa(i) + "-x"
	if k > 0 {
		name += strconv.Itoa(k)
	}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "bench", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: "svc-" + strconv.Itoa(i)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       benchshape.SlicePorts(i),
		Endpoints:   benchshape.Endpoints(i, k, gen, o.nodes, func(n int) string { return "node-" + strconv.Itoa(n) }),
	}
	if !trigger.IsZero() {
		s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: trigger.Format(time.RFC3339Nano)}
	}
	return s
}

func (o objects) sharedSlices(i int) []*discoveryv1.EndpointSlice {
	out := make([]*discoveryv1.EndpointSlice, benchshape.Slices(i))
	for k := range out {
		out[k] = o.sharedSlice(i, k, 0, time.Time{})
	}
	return out
}
