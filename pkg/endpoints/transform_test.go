package endpoints

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

var trimCreated = metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))

// bulkyMeta is what the API server sends besides identity: managedFields, owners,
// finalizers, labels and annotations nobody here reads.
func bulkyMeta(ns, name string, labels, annotations map[string]string) metav1.ObjectMeta {
	l := map[string]string{"app": "web", "team": "payments"}
	for k, v := range labels {
		l[k] = v
	}
	a := map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"a":"very long json"}`}
	for k, v := range annotations {
		a[k] = v
	}
	return metav1.ObjectMeta{
		Namespace: ns, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "42", Generation: 3,
		CreationTimestamp: trimCreated, Labels: l, Annotations: a,
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)}},
		OwnerReferences: []metav1.OwnerReference{{Kind: "Service", Name: name, UID: "owner"}},
		Finalizers:      []string{"example.com/keep"},
	}
}

func TestTrimService(t *testing.T) {
	local := v1.ServiceInternalTrafficPolicyLocal
	alloc := false
	dist := v1.ServiceTrafficDistributionPreferClose
	vip := v1.LoadBalancerIPModeVIP
	timeout := int32(60)
	// kept is every spec field a proxy reads: what TrimService keeps.
	kept := func() v1.ServiceSpec {
		return v1.ServiceSpec{
			Type:       v1.ServiceTypeLoadBalancer,
			ClusterIP:  "10.96.0.10",
			ClusterIPs: []string{"10.96.0.10", "fd00::10"},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol},
			Ports: []v1.ServicePort{
				{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080},
				{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53},
			},
			ExternalIPs:                   []string{"192.0.2.1"},
			SessionAffinity:               v1.ServiceAffinityClientIP,
			SessionAffinityConfig:         &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &timeout}},
			ExternalTrafficPolicy:         v1.ServiceExternalTrafficPolicyLocal,
			InternalTrafficPolicy:         &local,
			HealthCheckNodePort:           32000,
			LoadBalancerSourceRanges:      []string{"198.51.100.0/24"},
			AllocateLoadBalancerNodePorts: &alloc,
			TrafficDistribution:           &dist,
		}
	}
	spec := kept()
	// Read by controllers, not by a proxy:
	spec.Ports[0].TargetPort = intstr.FromString("web")
	spec.Ports[0].AppProtocol = ptr("http")
	spec.Selector = map[string]string{"app": "web"}
	spec.LoadBalancerIP = "192.0.2.9"
	spec.LoadBalancerClass = ptr("example.com/lb")
	spec.PublishNotReadyAddresses = true
	spec.IPFamilyPolicy = ptr(v1.IPFamilyPolicyPreferDualStack)
	full := &v1.Service{
		TypeMeta:   metav1.TypeMeta{Kind: "Service", APIVersion: "v1"},
		ObjectMeta: bulkyMeta("ns", "web", map[string]string{LabelServiceProxyName: "other"}, nil),
		Spec:       spec,
		Status: v1.ServiceStatus{
			LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{
				{IP: "192.0.2.2", IPMode: &vip, Hostname: "lb.example.com", Ports: []v1.PortStatus{{Port: 80, Protocol: v1.ProtocolTCP}}},
			}},
			Conditions: []metav1.Condition{{Type: "LoadBalancerReady", Status: metav1.ConditionTrue}},
		},
	}
	tests := []struct {
		name string
		in   *v1.Service
		want *v1.Service
	}{
		{name: "nil", in: nil, want: nil},
		{name: "bare", in: &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}},
			want: &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}},
		{name: "every field a proxy reads kept, the rest dropped", in: full, want: &v1.Service{
			TypeMeta: metav1.TypeMeta{Kind: "Service", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web", ResourceVersion: "42",
				CreationTimestamp: trimCreated, Labels: map[string]string{LabelServiceProxyName: "other"}},
			Spec:   kept(),
			Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "192.0.2.2", IPMode: &vip}}}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TrimService(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("TrimService (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(got, TrimService(got)); diff != "" {
				t.Errorf("not idempotent (-once +twice):\n%s", diff)
			}
			if tt.in != nil {
				// The tracker reads the same from the copy as from the original.
				if a, b := servicePorts(tt.in, IPv4, func(error) {}), servicePorts(got, IPv4, func(error) {}); !slices.Equal(a, b) {
					t.Errorf("tracker reads differently:\noriginal %+v\ntrimmed  %+v", a, b)
				}
			}
		})
	}
}

func TestTrimEndpointSlice(t *testing.T) {
	zone := "zone-a"
	trigger := "2026-11-30T12:00:00Z"
	// keptEP is every endpoint field a proxy reads: what TrimEndpointSlice keeps.
	keptEP := func() discoveryv1.Endpoint {
		return discoveryv1.Endpoint{
			Addresses:  []string{"10.0.0.1"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
			NodeName:   ptr("node-1"), Zone: &zone,
			Hints: &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}, ForNodes: []discoveryv1.ForNode{{Name: "node-1"}}},
		}
	}
	ep := keptEP()
	// Not read by a proxy:
	ep.Hostname = ptr("pod-1")
	ep.TargetRef = &v1.ObjectReference{Kind: "Pod", Name: "pod-1", Namespace: "ns", UID: "pod-uid"}
	ep.DeprecatedTopology = map[string]string{"kubernetes.io/hostname": "node-1"}
	full := &discoveryv1.EndpointSlice{
		ObjectMeta: bulkyMeta("ns", "web-abcde",
			map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"},
			map[string]string{v1.EndpointsLastChangeTriggerTime: trigger}),
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{ep},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(v1.ProtocolTCP), Port: ptr(int32(8080)), AppProtocol: ptr("http")}},
	}
	tests := []struct {
		name string
		in   *discoveryv1.EndpointSlice
		want *discoveryv1.EndpointSlice
	}{
		{name: "nil", in: nil, want: nil},
		{name: "every field a proxy reads kept, the rest dropped", in: full, want: &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-abcde", UID: "uid-web-abcde", ResourceVersion: "42",
				CreationTimestamp: trimCreated,
				Labels:            map[string]string{discoveryv1.LabelServiceName: "web"},
				Annotations:       map[string]string{v1.EndpointsLastChangeTriggerTime: trigger}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{keptEP()},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(v1.ProtocolTCP), Port: ptr(int32(8080))}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TrimEndpointSlice(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("TrimEndpointSlice (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(got, TrimEndpointSlice(got)); diff != "" {
				t.Errorf("not idempotent (-once +twice):\n%s", diff)
			}
			if tt.in != nil {
				if a, b := extractSlice(tt.in, IPv4, func(error) {}), extractSlice(got, IPv4, func(error) {}); !a.equal(b) {
					t.Errorf("tracker reads differently:\noriginal %+v\ntrimmed  %+v", a, b)
				}
			}
		})
	}
}

func TestTrimObjectPassesOthers(t *testing.T) {
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: &v1.Service{}}
	got, err := TrimObject(tomb)
	if err != nil || got != tomb {
		t.Errorf("TrimObject(tombstone) = %v, %v; want it unchanged", got, err)
	}
}

// TestInformersDeliverTrimmed: what reaches a tracker is the trimmed copy, not
// what the API server sent.
func TestInformersDeliverTrimmed(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc := svcA()
	svc.ObjectMeta = bulkyMeta(svc.Namespace, svc.Name, nil, nil)
	slice := sliceA1(readyEP("10.0.0.1"))
	slice.ObjectMeta = bulkyMeta(slice.Namespace, slice.Name, slice.Labels, nil)
	inf := NewInformers(fakeClients(fake.NewClientset(svc, slice)), nil, RetryOptions{})
	var mu sync.Mutex
	var got []any
	record := func(obj any) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, obj)
	}
	inf.services.upserts = append(inf.services.upserts, record)
	inf.slices.upserts = append(inf.slices.upserts, record)
	inf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.services.hasSynced, inf.slices.hasSynced) {
		t.Fatal("informers never synced")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("delivered %d objects, want the Service and the slice", len(got))
	}
	for _, obj := range got {
		m, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.GetManagedFields()) != 0 || len(m.GetOwnerReferences()) != 0 || m.GetAnnotations()["kubectl.kubernetes.io/last-applied-configuration"] != "" {
			t.Errorf("%s/%s delivered untrimmed: %+v", m.GetNamespace(), m.GetName(), m)
		}
	}
}

// TestTrimEndpointSliceSharesRepeatedValues: endpoints of one node (and their
// conditions) share one copy of the values they repeat.
func TestTrimEndpointSliceSharesRepeatedValues(t *testing.T) {
	a, b := readyEP("10.0.0.1"), readyEP("10.0.0.2")
	a.NodeName, b.NodeName = ptr("node-1"), ptr("node-1")
	got := TrimEndpointSlice(sliceA1(a, b))
	x, y := got.Endpoints[0], got.Endpoints[1]
	if x.NodeName != y.NodeName || x.Conditions.Ready != y.Conditions.Ready || *x.NodeName != "node-1" || !*x.Conditions.Ready {
		t.Fatalf("repeated values not shared: %+v, %+v", x, y)
	}
}
