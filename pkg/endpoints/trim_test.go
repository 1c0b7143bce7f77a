package endpoints

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// withoutUnread is obj as the trimmer leaves it: what the generated
// unmarshaller decodes from the trimmed bytes.
func withoutUnread(obj runtime.Object) runtime.Object {
	obj = obj.DeepCopyObject()
	m := obj.(metav1.Object)
	only := func(in map[string]string, key string) map[string]string {
		if v, ok := in[key]; ok {
			return map[string]string{key: v}
		}
		return nil
	}
	m.SetManagedFields(nil)
	m.SetOwnerReferences(nil)
	m.SetFinalizers(nil)
	m.SetGenerateName("")
	annotations := map[string]string{}
	for _, k := range []string{metav1.InitialEventsAnnotationKey, v1.EndpointsLastChangeTriggerTime} {
		if v, ok := m.GetAnnotations()[k]; ok {
			annotations[k] = v
		}
	}
	switch o := obj.(type) {
	case *v1.Service:
		delete(annotations, v1.EndpointsLastChangeTriggerTime)
		o.Labels = only(o.Labels, LabelServiceProxyName)
	case *discoveryv1.EndpointSlice:
		o.Labels = only(o.Labels, discoveryv1.LabelServiceName)
		for i := range o.Endpoints {
			o.Endpoints[i].TargetRef, o.Endpoints[i].DeprecatedTopology = nil, nil
		}
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	m.SetAnnotations(annotations)
	return obj
}

// TestTrimmerKeepsWhatSvcproxyReads: a Service as kubectl apply leaves it and an
// EndpointSlice as the controller writes it lose most of their bytes, decode to
// the objects less the dropped fields, and give the tracker the same values.
func TestTrimmerKeepsWhatSvcproxyReads(t *testing.T) {
	svc, slice := benchService(7), benchSlice(7, 10)
	svc.Labels[LabelServiceProxyName] = "svcproxy"
	svc.Finalizers = []string{"service.kubernetes.io/load-balancer-cleanup"}
	svc.Annotations[metav1.InitialEventsAnnotationKey] = "true"
	slice.Endpoints[3].DeprecatedTopology = map[string]string{"topology.kubernetes.io/zone": "a"}
	var tr trimmer
	for _, tc := range []struct {
		name     string
		obj      protoItem
		trim     itemTrim
		smallest float64 // most of the bytes the trimmed item may keep
	}{
		{"Service", svc, (*trimmer).service, 0.5},
		{"EndpointSlice", slice, (*trimmer).slice, 0.6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full, err := tc.obj.(interface{ Marshal() ([]byte, error) }).Marshal()
			if err != nil {
				t.Fatal(err)
			}
			trimmed, err := tc.trim(&tr, full)
			if err != nil {
				t.Fatal(err)
			}
			if r := float64(len(trimmed)) / float64(len(full)); r > tc.smallest {
				t.Errorf("trimmed to %d of %d bytes (%.2f), want at most %.2f", len(trimmed), len(full), r, tc.smallest)
			}
			got := reflect.New(reflect.TypeOf(tc.obj).Elem()).Interface().(protoItem)
			if err := got.Unmarshal(trimmed); err != nil {
				t.Fatal(err)
			}
			whole := reflect.New(reflect.TypeOf(tc.obj).Elem()).Interface().(protoItem)
			if err := whole.Unmarshal(full); err != nil {
				t.Fatal(err)
			}
			if want := withoutUnread(whole); !reflect.DeepEqual(got, want) {
				t.Errorf("trimmed decodes to\n%+v\nwant\n%+v", got, want)
			}
		})
	}
	// What the tracker makes of them, trimmed or whole.
	snapshot := func(trim bool) Snapshot {
		tk := NewTracker(TrackerOptions{})
		svc, slice := benchService(7), benchSlice(7, 10)
		if trim {
			svcBytes, _ := svc.Marshal()
			sliceBytes, _ := slice.Marshal()
			svc, slice = &v1.Service{}, &discoveryv1.EndpointSlice{}
			if b, err := tr.service(svcBytes); err != nil || svc.Unmarshal(b) != nil {
				t.Fatal("trimmed Service does not decode")
			}
			if b, err := tr.slice(sliceBytes); err != nil || slice.Unmarshal(b) != nil {
				t.Fatal("trimmed EndpointSlice does not decode")
			}
		}
		tk.OnServiceAdd(svc)
		tk.OnEndpointSliceAdd(slice)
		snap, _, _ := tk.Take()
		return snap
	}
	whole, trimmed := snapshot(false), snapshot(true)
	if len(whole.Endpoints(ServicePortName{Namespace: "bench", Name: "svc-7", Port: "http", Protocol: "TCP"})) != 10 || !reflect.DeepEqual(whole, trimmed) {
		t.Errorf("the tracker's snapshot of the trimmed objects\n%+v\nof the whole\n%+v", trimmed, whole)
	}
}

// FuzzTrimmer: whatever the bytes, no panic; where the generated unmarshaller
// decodes an item whole and the trimmer reads it, the trimmed bytes decode to the
// same object less what the trimmer drops.
func FuzzTrimmer(f *testing.F) {
	for _, o := range []interface{ Marshal() ([]byte, error) }{benchService(1), benchSlice(2, 3)} {
		b, err := o.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var tr trimmer
		for _, k := range []struct {
			item func() protoItem
			trim itemTrim
		}{
			{func() protoItem { return &v1.Service{} }, (*trimmer).service},
			{func() protoItem { return &discoveryv1.EndpointSlice{} }, (*trimmer).slice},
		} {
			whole := k.item()
			if whole.Unmarshal(data) != nil {
				continue
			}
			trimmed, err := k.trim(&tr, data)
			if err != nil {
				continue
			}
			got := k.item()
			if err := got.Unmarshal(trimmed); err != nil {
				t.Fatalf("trimmed %T does not decode: %v", got, err)
			}
			if want := withoutUnread(whole); !reflect.DeepEqual(got, want) {
				t.Fatalf("trimmed decodes to\n%+v\nwant\n%+v", got, want)
			}
		}
	})
}
