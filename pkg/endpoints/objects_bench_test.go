package endpoints

import (
	"bufio"
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// BenchmarkFeedIngest is the informer path of a cold start for 10k Services with
// one 10-endpoint EndpointSlice each, as the API server sends them (managedFields,
// kubectl's last-applied annotation, targetRefs): the two lists in the protobuf
// encoding, decoded item by item (decodeProtobufList) and handed by the feed to a
// tracker. Per op: all 20k objects. "whole" decodes every field, as before the
// trimmer; "trimmed" is svcproxy's way.
//
//	go test -run X -bench FeedIngest -benchmem ./pkg/endpoints/
func BenchmarkFeedIngest(b *testing.B) {
	const n, eps = 10000, 10
	svcs, slices := &v1.ServiceList{}, &discoveryv1.EndpointSliceList{}
	for i := 0; i < n; i++ {
		svcs.Items = append(svcs.Items, *benchService(i))
		slices.Items = append(slices.Items, *benchSlice(i, eps))
	}
	svcWire, sliceWire := encodeProto(b, svcs), encodeProto(b, slices)
	for _, tc := range []struct {
		name    string
		trimmed bool
	}{{"whole", false}, {"trimmed", true}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				inf := Informers{services: newFeed(KindService), slices: newFeed(KindEndpointSlice)}
				if _, err := RegisterSynced(inf, NewTracker(TrackerOptions{})); err != nil {
					b.Fatal(err)
				}
				for _, l := range []struct {
					wire []byte
					k    listedKind
					f    *feed
				}{{svcWire, serviceLists, inf.services}, {sliceWire, sliceLists, inf.slices}} {
					trim := l.k.trim
					if !tc.trimmed {
						trim = nil
					}
					if _, err := decodeProtobufList(bufio.NewReaderSize(bytes.NewReader(l.wire), 64<<10), l.k.kind, l.k.item, trim,
						func(obj k8sruntime.Object) error { return l.f.Add(obj) }); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

var benchCreated = metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))

func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// benchService is Service i as kubectl apply leaves it.
func benchService(i int) *v1.Service {
	name := fmt.Sprintf("svc-%d", i)
	ip := fmt.Sprintf("10.96.%d.%d", i>>8&0xff, i&0xff)
	return &v1.Service{
		TypeMeta: metav1.TypeMeta{Kind: "Service", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name, UID: types.UID(fmt.Sprintf("0f1e2d3c-%08d-4b5a-8f7e-6d5c4b3a2910", i)),
			ResourceVersion: fmt.Sprint(100000 + i), CreationTimestamp: benchCreated,
			Labels: map[string]string{"app": name, "app.kubernetes.io/part-of": "bench"},
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": fmt.Sprintf(
				`{"apiVersion":"v1","kind":"Service","metadata":{"annotations":{},"labels":{"app":%q},"name":%q,"namespace":"bench"},"spec":{"ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":8080}],"selector":{"app":%q}}}`, name, name, name)},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &benchCreated, FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:internalTrafficPolicy":{},"f:ports":{".":{},"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:name":{},"f:port":{},"f:protocol":{},"f:targetPort":{}}},"f:selector":{},"f:sessionAffinity":{},"f:type":{}}}`)}},
		},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip}, IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			IPFamilyPolicy: ptr(v1.IPFamilyPolicySingleStack), InternalTrafficPolicy: ptr(v1.ServiceInternalTrafficPolicyCluster),
			SessionAffinity: v1.ServiceAffinityNone, Selector: map[string]string{"app": name},
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
}

// benchSlice is Service i's EndpointSlice as the EndpointSlice controller writes it.
func benchSlice(i, eps int) *discoveryv1.EndpointSlice {
	svc := fmt.Sprintf("svc-%d", i)
	s := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: svc + "-x7k2p", UID: types.UID(fmt.Sprintf("9a8b7c6d-%08d-4e3f-a1b2-c3d4e5f60718", i)),
			ResourceVersion: fmt.Sprint(200000 + i), CreationTimestamp: benchCreated, GenerateName: svc + "-",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
				"app": svc},
			Annotations:     map[string]string{v1.EndpointsLastChangeTriggerTime: "2026-11-30T12:00:00Z"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc, UID: "0f1e2d3c", Controller: ptr(true), BlockOwnerDeletion: ptr(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "discovery.k8s.io/v1", Time: &benchCreated, FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:addressType":{},"f:endpoints":{},"f:metadata":{"f:annotations":{".":{},"f:endpoints.kubernetes.io/last-change-trigger-time":{}},"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:endpointslice.kubernetes.io/managed-by":{},"f:kubernetes.io/service-name":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"0f1e2d3c\"}":{}}},"f:ports":{}}`)}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(v1.ProtocolTCP), Port: ptr(int32(8080))}},
	}
	for j := 0; j < eps; j++ {
		k := i*eps + j
		pod := fmt.Sprintf("%s-7d9f8c6b5-%05d", svc, j)
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 128+k>>16&0x7f, k>>8&0xff, k&0xff)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
			NodeName:   ptr(fmt.Sprintf("node-%d", k%100)),
			TargetRef:  &v1.ObjectReference{Kind: "Pod", Namespace: "bench", Name: pod, UID: types.UID(fmt.Sprintf("5e4d3c2b-%08d-4a59-8877-665544332211", k))},
		})
	}
	return s
}
