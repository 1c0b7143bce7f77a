//go:build e2e

package e2e

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcproxy/svcproxy/internal/benchshape"
)

// The side by side's objects come in the in-process bench's shapes
// (E2E_BENCH_SHAPE, hack/bench.sh's BENCH_SHAPE): "disjoint", every Service its
// own 10 endpoints (benchobjects_test.go), or "shared" (internal/benchshape,
// issue 22): pods behind 3 Services each, mixed sizes split into slices of at
// most 100, named ports, a third of the slices without nodeName, some NodePort
// and LoadBalancer Services. Both have Service b-i on benchClusterIP(i) port 80.

// benchObjects are one shape's objects.
type benchObjects interface {
	name() string
	service(i int) *corev1.Service
	// slices are Service i's EndpointSlices before any change.
	slices(i int) []*discoveryv1.EndpointSlice
	// changed is the slice change gen writes (gen 0: the one it restores).
	changed(i, gen int) *discoveryv1.EndpointSlice
	// serves says whether an answer from an address can only come once Service
	// i's gen is programmed (gen 0: any of its endpoints).
	serves(i, gen int) func(netip.Addr) bool
	// changeService is the Service the s-th of the changes timed among n touches.
	changeService(s, n int) int
}

func benchObjectsFor(shape string) (benchObjects, error) {
	switch shape {
	case "", "disjoint":
		return disjointObjects{}, nil
	case "shared":
		return sharedObjects{}, nil
	}
	return nil, fmt.Errorf("E2E_BENCH_SHAPE=%q: want disjoint or shared", shape)
}

// disjointObjects are benchService and benchSlice: a change replaces all 10
// endpoints of a Service by new addresses.
type disjointObjects struct{}

func (disjointObjects) name() string                  { return "disjoint" }
func (disjointObjects) service(i int) *corev1.Service { return benchService(i) }
func (disjointObjects) slices(i int) []*discoveryv1.EndpointSlice {
	return []*discoveryv1.EndpointSlice{benchSlice(i, 0)}
}
func (disjointObjects) changed(i, gen int) *discoveryv1.EndpointSlice { return benchSlice(i, gen) }
func (disjointObjects) serves(i, gen int) func(netip.Addr) bool       { return benchServes(i, gen) }
func (disjointObjects) changeService(s, n int) int                    { return (s * 7919) % n }

// sharedObjects: a change replaces the one endpoint of a one-endpoint Service
// by a pod that three other Services share (what issue 22 found slow), so the
// first answer from the new pod is the change programmed, with no sampling delay.
type sharedObjects struct{}

func (sharedObjects) name() string { return "shared" }

func (sharedObjects) service(i int) *corev1.Service {
	s := benchService(i)
	benchshape.Expose(s, i)
	return s
}

func (o sharedObjects) slices(i int) []*discoveryv1.EndpointSlice {
	out := make([]*discoveryv1.EndpointSlice, benchshape.Slices(i))
	for k := range out {
		out[k] = o.slice(i, k, 0)
	}
	return out
}

func (o sharedObjects) changed(i, gen int) *discoveryv1.EndpointSlice { return o.slice(i, 0, gen) }

func (sharedObjects) serves(i, gen int) func(netip.Addr) bool { return benchshape.Serves(i, gen) }

// changeService is the first one-endpoint Service from where the disjoint
// shape's s-th change is.
func (sharedObjects) changeService(s, n int) int {
	i := (s * 7919) % n
	for k := 0; k < n && benchshape.Size(i) != 1; k++ {
		i = (i + 1) % n
	}
	return i
}

// slice is slice k of Service i at gen: b-i, b-i-1, ...; the proxy's node is
// pod p's when p mod benchNodes is 0, as in the disjoint shape.
func (sharedObjects) slice(i, k, gen int) *discoveryv1.EndpointSlice {
	name := fmt.Sprintf("b-%d", i)
	if k > 0 {
		name += fmt.Sprintf("-%d", k)
	}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNS, Labels: map[string]string{
			discoveryv1.LabelServiceName: fmt.Sprintf("b-%d", i),
			discoveryv1.LabelManagedBy:   "bench.svcproxy.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       benchshape.SlicePorts(i),
		Endpoints: benchshape.Endpoints(i, k, gen, benchNodes, func(n int) string {
			if n == 0 {
				return benchNodeName
			}
			return fmt.Sprintf("bench-node-%d", n)
		}),
	}
	for j := range s.Endpoints {
		s.Endpoints[j].Conditions = discoveryv1.EndpointConditions{Ready: ref(true)}
	}
	return s
}
