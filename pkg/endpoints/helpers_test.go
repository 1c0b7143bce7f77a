package endpoints

import (
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ptr[T any](v T) *T { return &v }

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// svcOpt mutates a test Service.
type svcOpt func(*v1.Service)

// makeService returns a ClusterIP Service "ns/name" at ip with the given
// ports ("name" may be empty).
func makeService(ns, name, ip string, ports []v1.ServicePort, opts ...svcOpt) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"},
		Spec: v1.ServiceSpec{
			Type:      v1.ServiceTypeClusterIP,
			ClusterIP: ip,
			Ports:     ports,
		},
	}
	if ip != "" && ip != v1.ClusterIPNone {
		s.Spec.ClusterIPs = []string{ip}
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func tcpPort(name string, port int32) v1.ServicePort {
	return v1.ServicePort{Name: name, Port: port, Protocol: v1.ProtocolTCP}
}

func udpPort(name string, port int32) v1.ServicePort {
	return v1.ServicePort{Name: name, Port: port, Protocol: v1.ProtocolUDP}
}

// makeSlice returns an IPv4 EndpointSlice ns/name for Service svc.
func makeSlice(ns, name, svc string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       ports,
		Endpoints:   eps,
	}
	if svc != "" {
		s.Labels = map[string]string{discoveryv1.LabelServiceName: svc}
	}
	return s
}

func slicePortOf(name string, proto v1.Protocol, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr(name), Protocol: ptr(proto), Port: ptr(port)}
}

// ep returns a slice endpoint with explicit conditions; nil leaves one unset.
func ep(ip string, ready, serving, terminating *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{ip},
		Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating},
	}
}

func readyEP(ip string) discoveryv1.Endpoint { return ep(ip, ptr(true), ptr(true), ptr(false)) }

// invalidRecorder collects OnInvalid calls.
type invalidRecorder struct {
	mu    sync.Mutex
	calls []invalidCall
}

type invalidCall struct{ Kind, Namespace, Name, Reason string }

func (r *invalidRecorder) record(kind, ns, name, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, invalidCall{kind, ns, name, reason})
}

func (r *invalidRecorder) get() []invalidCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]invalidCall(nil), r.calls...)
}

// errCollector is the report func given to the pure extractors.
type errCollector []error

func (c *errCollector) report(err error) { *c = append(*c, err) }

// fakeClock advances one second per reading so event order shows in
// firstEvent.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

func keysOf(m map[ServiceKey]struct{}) map[ServiceKey]bool {
	out := make(map[ServiceKey]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

func mustEqualf[T comparable](t *testing.T, got, want T, format string, args ...any) {
	t.Helper()
	if got != want {
		t.Errorf(format+": got %v, want %v", append(args, got, want)...)
	}
}

// cmpOpts lets go-cmp compare netip values, whose fields are unexported.
var cmpOpts = []cmp.Option{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
}

// takeInBothOrders runs check as two subtests, name and name + " (reversed)": each
// adds services, in that order or reversed, to a new Tracker and takes a snapshot;
// check gets it and the conflicts reported.
func takeInBothOrders(t *testing.T, name string, services []*v1.Service, check func(t *testing.T, snap Snapshot, conflicts []ConflictChange)) {
	t.Helper()
	for _, reverse := range []bool{false, true} {
		sub, order := name, slices.Clone(services)
		if reverse {
			sub += " (reversed)"
			slices.Reverse(order)
		}
		t.Run(sub, func(t *testing.T) {
			var got []ConflictChange
			tr := NewTracker(TrackerOptions{OnConflict: func(c ConflictChange) { got = append(got, c) }})
			for _, s := range order {
				tr.OnServiceAdd(s)
			}
			snap, _, _ := tr.Take()
			check(t, snap, got)
		})
	}
}
