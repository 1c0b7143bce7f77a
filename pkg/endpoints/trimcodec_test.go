package endpoints

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// encodeObject is obj in the API server's protobuf envelope.
func encodeObject(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		t.Fatal(err)
	}
	obj = obj.DeepCopyObject()
	obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	b, err := runtime.Encode(protoCodec, obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTrimmingDecoder: Services and EndpointSlices decode as the protobuf
// serializer decodes them, less what the trimmer drops; other kinds, and bytes
// it cannot read, exactly as the serializer decodes them.
func TestTrimmingDecoder(t *testing.T) {
	d := &trimmingDecoder{Serializer: protoCodec}
	for _, tc := range []struct {
		name    string
		data    []byte
		trimmed bool
	}{
		{"Service", encodeObject(t, benchService(3)), true},
		{"EndpointSlice", encodeObject(t, benchSlice(3, 10)), true},
		{"Status", encodeObject(t, &metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonExpired, Code: 410}), false},
		{"Node", encodeObject(t, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}}}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, _, err := protoCodec.Decode(tc.data, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.trimmed {
				want = withoutUnread(want)
			}
			got, _, err := d.Decode(tc.data, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decoded\n%+v\nwant\n%+v", got, want)
			}
		})
	}
	if _, _, err := d.Decode([]byte("k8s\x00\x12\x05"), nil, nil); err == nil {
		t.Error("a cut envelope decoded")
	}
}

// TestRestWatchTrims: a watch through TrimmingRESTClient, against a server that
// streams protobuf watch events as kube-apiserver does, delivers the
// EndpointSlices trimmed and the bookmark that ends a watch-list's initial events
// with the annotation that says so (without it the reflector never ends a relist),
// and asks for a watch with the reflector's options.
func TestRestWatchTrims(t *testing.T) {
	slice := benchSlice(5, 10)
	data := encodeObject(t, slice)
	bookmark := encodeObject(t, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "9",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/discovery.k8s.io/v1/endpointslices" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		query = r.URL.RawQuery
		info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf+";stream=watch")
		enc := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(w), info.StreamSerializer.Serializer)
		for _, typ := range []watch.EventType{watch.Added, watch.Modified} {
			if err := enc.Encode(&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: data}}); err != nil {
				t.Error(err)
			}
		}
		if err := enc.Encode(&metav1.WatchEvent{Type: string(watch.Bookmark), Object: runtime.RawExtension{Raw: bookmark}}); err != nil {
			t.Error(err)
		}
	}))
	defer srv.Close()
	rc, err := TrimmingRESTClient(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: runtime.ContentTypeProtobuf}},
		srv.Client(), discoveryv1.SchemeGroupVersion, "/apis")
	if err != nil {
		t.Fatal(err)
	}
	w, err := restWatch(context.Background(), rc, sliceLists, metav1.ListOptions{ResourceVersion: "7", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	whole, _, err := protoCodec.Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := withoutUnread(whole)
	want.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{}) // the client's decoder clears it for typed objects
	var got []watch.EventType
	for ev := range w.ResultChan() {
		got = append(got, ev.Type)
		if ev.Type == watch.Bookmark {
			if a := ev.Object.(metav1.Object).GetAnnotations(); a[metav1.InitialEventsAnnotationKey] != "true" {
				t.Errorf("the bookmark's annotations %v lost %s", a, metav1.InitialEventsAnnotationKey)
			}
			continue
		}
		if !reflect.DeepEqual(ev.Object, want) {
			t.Errorf("%s event's object\n%+v\nwant\n%+v", ev.Type, ev.Object, want)
		}
	}
	if !reflect.DeepEqual(got, []watch.EventType{watch.Added, watch.Modified, watch.Bookmark}) {
		t.Errorf("events %v, want ADDED, MODIFIED and BOOKMARK", got)
	}
	if want := "allowWatchBookmarks=true&resourceVersion=7&watch=true"; query != want {
		t.Errorf("query %q, want %q", query, want)
	}
}

// FuzzTrimmingDecoder: whatever the bytes, no panic; where the protobuf
// serializer decodes them, the trimming decoder decodes the same object, less
// what the trimmer drops of a Service or an EndpointSlice.
func FuzzTrimmingDecoder(f *testing.F) {
	f.Add(encodeObject(f, benchService(1)))
	f.Add(encodeObject(f, benchSlice(2, 2)))
	f.Add(encodeObject(f, &metav1.Status{Code: 410}))
	d := &trimmingDecoder{Serializer: protoCodec}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, _, err := protoCodec.Decode(data, nil, nil)
		if err != nil {
			return
		}
		got, _, err := d.Decode(data, nil, nil)
		if err != nil {
			t.Fatalf("the serializer decodes a %T, the trimming decoder: %v", want, err)
		}
		switch want.(type) {
		case *v1.Service, *discoveryv1.EndpointSlice:
			want = withoutUnread(want)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded\n%+v\nwant\n%+v", got, want)
		}
	})
}
