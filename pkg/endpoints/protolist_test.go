package endpoints

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

var protoCodec = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

// encodeProto is a list as kube-apiserver sends it with protobuf negotiated.
func encodeProto(t testing.TB, list runtime.Object) []byte {
	t.Helper()
	var b bytes.Buffer
	gvks, _, err := scheme.Scheme.ObjectKinds(list)
	if err != nil {
		t.Fatal(err)
	}
	list = list.DeepCopyObject()
	list.GetObjectKind().SetGroupVersionKind(gvks[0])
	if err := protoCodec.Encode(list, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func serviceList(n int, lm metav1.ListMeta) *v1.ServiceList {
	l := &v1.ServiceList{ListMeta: lm}
	for i := range n {
		s := makeService("ns", fmt.Sprintf("s%d", i), "10.96.0.1", []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}})
		s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
		l.Items = append(l.Items, *s)
	}
	return l
}

func sliceList(n int) *discoveryv1.EndpointSliceList {
	l := &discoveryv1.EndpointSliceList{ListMeta: metav1.ListMeta{ResourceVersion: "77"}}
	for i := range n {
		s := makeSlice("ns", fmt.Sprintf("s%d-abc", i), fmt.Sprintf("s%d", i),
			[]discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr[int32](8080)}},
			discoveryv1.Endpoint{Addresses: []string{"10.244.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}},
			discoveryv1.Endpoint{Addresses: []string{"10.244.0.2"}, NodeName: ptr("n1"),
				TargetRef: &v1.ObjectReference{Kind: "Pod", Name: "p2"}, DeprecatedTopology: map[string]string{"k": "v"}})
		s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: "2026-12-06T12:00:00Z", "other": "x"}
		s.OwnerReferences = []metav1.OwnerReference{{Kind: "Service", Name: fmt.Sprintf("s%d", i)}}
		s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}
		l.Items = append(l.Items, *s)
	}
	return l
}

// decodeAll runs decodeProtobufList over data, gathering copies of the items
// (the decoder reuses one object).
func decodeAll[T any, PT interface {
	*T
	protoItem
}](data []byte, kind string, trim itemTrim) ([]T, metav1.ListMeta, error) {
	var got []T
	lm, err := decodeProtobufList(bufio.NewReaderSize(bytes.NewReader(data), 16), kind,
		func() protoItem { return PT(new(T)) }, trim,
		func(obj runtime.Object) error {
			got = append(got, *obj.DeepCopyObject().(PT))
			return nil
		})
	return got, lm, err
}

// TestDecodeProtobufListAsTheSerializer: item by item, the stream decoder
// gives what client-go's protobuf serializer decodes from the whole body, less
// the fields the trimmer drops, with the list's resource version and continue
// token, through a reader buffer smaller than one item.
func TestDecodeProtobufListAsTheSerializer(t *testing.T) {
	for _, tc := range []struct {
		name string
		list runtime.Object
		k    listedKind
		lm   metav1.ListMeta
	}{
		{"no Service", serviceList(0, metav1.ListMeta{ResourceVersion: "1"}), serviceLists, metav1.ListMeta{ResourceVersion: "1"}},
		{"one Service", serviceList(1, metav1.ListMeta{ResourceVersion: "12"}), serviceLists, metav1.ListMeta{ResourceVersion: "12"}},
		{"a page of Services", serviceList(50, metav1.ListMeta{ResourceVersion: "345", Continue: "tok", RemainingItemCount: ptr[int64](7)}),
			serviceLists, metav1.ListMeta{ResourceVersion: "345", Continue: "tok", RemainingItemCount: ptr[int64](7)}},
		{"EndpointSlices", sliceList(20), sliceLists, metav1.ListMeta{ResourceVersion: "77"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := encodeProto(t, tc.list)
			want := tc.k.list()
			if _, _, err := protoCodec.Decode(data, nil, want); err != nil {
				t.Fatal(err)
			}
			wantItems, err := meta.ExtractList(want)
			if err != nil {
				t.Fatal(err)
			}
			for i := range wantItems {
				wantItems[i] = withoutUnread(wantItems[i])
			}
			var got []runtime.Object
			lm, err := decodeProtobufList(bufio.NewReaderSize(bytes.NewReader(data), 16), tc.k.kind, tc.k.item, tc.k.trim,
				func(obj runtime.Object) error { got = append(got, obj.DeepCopyObject()); return nil })
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(wantItems) || (len(got) > 0 && !reflect.DeepEqual(got, wantItems)) {
				t.Errorf("items differ from the serializer's:\n got %+v\nwant %+v", got, wantItems)
			}
			if !reflect.DeepEqual(lm, tc.lm) {
				t.Errorf("list meta %+v, want %+v", lm, tc.lm)
			}
		})
	}
}

// TestDecodeProtobufListSizesEndpoints: a listed EndpointSlice's endpoints are
// unmarshalled into a list of their own size, never grown one append at a
// time (the copies the doubling leaves were a fifth of a 100k cold start's
// garbage); a slice without endpoints keeps none.
func TestDecodeProtobufListSizesEndpoints(t *testing.T) {
	l := &discoveryv1.EndpointSliceList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	for i, n := range []int{0, 1, 3, 5, 100} {
		eps := make([]discoveryv1.Endpoint, n)
		for j := range eps {
			eps[j] = discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.%d.%d", j/250, j%250+1)}}
		}
		l.Items = append(l.Items, *makeSlice("ns", fmt.Sprintf("s%d-abc", i), fmt.Sprintf("s%d", i), nil, eps...))
	}
	got, _, err := decodeAll[discoveryv1.EndpointSlice](encodeProto(t, l), "EndpointSliceList", (*trimmer).slice)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(l.Items) {
		t.Fatalf("decoded %d slices, want %d", len(got), len(l.Items))
	}
	for i, s := range got {
		if n := len(l.Items[i].Endpoints); len(s.Endpoints) != n || cap(s.Endpoints) != n || (n == 0 && s.Endpoints != nil) {
			t.Errorf("%s: %d endpoints in room for %d (nil: %v), want %d in %d", s.Name, len(s.Endpoints), cap(s.Endpoints), s.Endpoints == nil, n, n)
		}
	}
}

// TestListedObjectsReusedLeaveTheTrackerWhole: the list decoder unmarshals every
// item into one object and lends each slice the same endpoint list; a tracker
// fed that way ends up as one fed fresh objects, so it keeps nothing of an
// object after taking it (what it kept would be overwritten by the next item).
func TestListedObjectsReusedLeaveTheTrackerWhole(t *testing.T) {
	svcs, slices := &v1.ServiceList{}, &discoveryv1.EndpointSliceList{}
	for i, n := range []int{10, 3, 25, 1, 7, 0, 40, 2} {
		svcs.Items = append(svcs.Items, *benchService(i))
		slices.Items = append(slices.Items, *benchSlice(i, n))
	}
	fresh, streamed := NewTracker(TrackerOptions{}), NewTracker(TrackerOptions{})
	for i := range svcs.Items {
		fresh.OnServiceAdd(&svcs.Items[i])
		fresh.OnEndpointSliceAdd(&slices.Items[i])
	}
	for _, l := range []struct {
		k    listedKind
		list runtime.Object
	}{{serviceLists, svcs}, {sliceLists, slices}} {
		_, err := decodeProtobufList(bufio.NewReaderSize(bytes.NewReader(encodeProto(t, l.list)), 16), l.k.kind, l.k.item, l.k.trim,
			func(obj runtime.Object) error {
				switch o := obj.(type) {
				case *v1.Service:
					streamed.OnServiceAdd(o)
				case *discoveryv1.EndpointSlice:
					streamed.OnEndpointSliceAdd(o)
				}
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
	}
	want, _, _ := fresh.Take()
	got, _, _ := streamed.Take()
	if len(want.Endpoints(ServicePortName{Namespace: "bench", Name: "svc-6", Port: "http", Protocol: "TCP"})) != 40 || !reflect.DeepEqual(got, want) {
		t.Errorf("the tracker fed the decoder's reused objects has\n%+v\nwant\n%+v", got, want)
	}
}

// TestDecodeProtobufListRefuses: a body cut anywhere before the list's end,
// another kind, an encoded body or no protobuf at all is an error, never a
// shorter list taken for the whole; a cut is io.ErrUnexpectedEOF, which the
// retrying lister retries like a dropped connection.
func TestDecodeProtobufListRefuses(t *testing.T) {
	data := encodeProto(t, serviceList(3, metav1.ListMeta{ResourceVersion: "9"}))
	// The Unknown ends with its empty contentEncoding and contentType; the
	// list (its raw field) ends before them. A cut inside the list's field is
	// io.ErrUnexpectedEOF; before it, there is no list.
	tail := []byte{0x1a, 0, 0x22, 0}
	if !bytes.HasSuffix(data, tail) {
		t.Fatalf("the serializer's body ends % x, want % x", data[len(data)-4:], tail)
	}
	listStart := len(protobufMagic) + 2 + int(data[len(protobufMagic)+1]) // after the typeMeta field
	if data[listStart] != 0x12 {
		t.Fatalf("byte %d is % x, want the raw field's tag 12", listStart, data[listStart])
	}
	for cut := 1; cut < len(data)-len(tail); cut++ {
		_, _, err := decodeAll[v1.Service](data[:cut], "ServiceList", (*trimmer).service)
		if err == nil {
			t.Fatalf("cut at %d of %d bytes: no error", cut, len(data))
		}
		if cut > listStart && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut at %d (the list from %d): %v, want io.ErrUnexpectedEOF", cut, listStart, err)
		}
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"another kind", encodeProto(t, sliceList(1)), "got a EndpointSliceList, want a ServiceList"},
		{"JSON", []byte(`{"kind":"ServiceList","items":[]}`), errNotProtobuf.Error()},
		{"empty", nil, errNotProtobuf.Error()},
		{"only the magic", protobufMagic[:], "no list in the body"},
		{"an encoded body", append(append([]byte{}, data...), 0x1a, 4, 'g', 'z', 'i', 'p'), `content encoding "gzip"`},
		{"a length past the body", append(protobufMagic[:], 0x12, 0xff, 0xff, 0x03), "unexpected EOF"},
		{"an item past any object", append(protobufMagic[:], 0x12, 0x80, 0x80, 0x80, 0x40, 0x12, 0x81, 0x80, 0x80, 0x20), "not an object"},
		{"a length past any stream", append(protobufMagic[:], 0x12, 0x80, 0x80, 0x80, 0x80, 0x10), "runs past its message"},
		{"an item past its list", append(protobufMagic[:], 0x12, 0x02, 0x12, 0x05, 1, 2, 3, 4, 5), "runs past its message"},
		{"field number 0", append(protobufMagic[:], 0x02, 0x00), "field number 0"},
		{"a group", append(protobufMagic[:], 0x13), "wire type 3"},
		{"two lists", append(append([]byte{}, data...), data[4:]...), "two lists"},
	} {
		_, _, err := decodeAll[v1.Service](tc.data, "ServiceList", (*trimmer).service)
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestDecodeProtobufListOver64MiB: the list is streamed, not read into memory:
// one larger than any item may be (100k EndpointSlices are ~100 MiB) decodes.
func TestDecodeProtobufListOver64MiB(t *testing.T) {
	const filler = maxListItemBytes + 1                 // a field the decoder skips
	field := binary.AppendUvarint([]byte{0x7a}, filler) // field 15, bytes
	lmeta := []byte{0x0a, 0x04, 0x12, 0x02, '4', '2'}   // metadata{resourceVersion: "42"}
	head := binary.AppendUvarint(append(protobufMagic[:], 0x12), uint64(len(field)+filler+len(lmeta)))
	body := io.MultiReader(bytes.NewReader(append(head, field...)), io.LimitReader(zeros{}, filler), bytes.NewReader(lmeta))
	lm, err := decodeProtobufList(bufio.NewReader(body), "ServiceList",
		func() protoItem { return &v1.Service{} }, nil, func(runtime.Object) error { return nil })
	if err != nil || lm.ResourceVersion != "42" {
		t.Errorf("a list of over 64 MiB: %v at %q, want it decoded at 42", err, lm.ResourceVersion)
	}
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestDecodeProtobufListStopsAtDeliveryError: the error of a delivery ends
// the list at once.
func TestDecodeProtobufListStopsAtDeliveryError(t *testing.T) {
	data := encodeProto(t, serviceList(5, metav1.ListMeta{}))
	calls := 0
	stop := errors.New("stop")
	_, err := decodeProtobufList(bufio.NewReader(bytes.NewReader(data)), "ServiceList",
		func() protoItem { return &v1.Service{} }, nil,
		func(runtime.Object) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("err %v after %d deliveries, want stop after 1", err, calls)
	}
}

// FuzzDecodeProtobufList: whatever the bytes, no panic, no item past a
// failure; where client-go's serializer also decodes the body, the same
// items, less what the trimmer drops, and list metadata.
func FuzzDecodeProtobufList(f *testing.F) {
	f.Add(encodeProto(f, serviceList(2, metav1.ListMeta{ResourceVersion: "3", Continue: "c"})))
	f.Add(encodeProto(f, serviceList(0, metav1.ListMeta{})))
	f.Add(encodeProto(f, sliceList(1)))
	f.Add(append(protobufMagic[:], 0x12, 0x02, 0x12, 0x00))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, lm, err := decodeAll[v1.Service](data, "ServiceList", (*trimmer).service)
		if err != nil {
			return
		}
		want := &v1.ServiceList{}
		if _, _, werr := protoCodec.Decode(data, nil, want); werr != nil {
			return
		}
		for i := range want.Items {
			want.Items[i] = *withoutUnread(&want.Items[i]).(*v1.Service)
		}
		if len(got) != len(want.Items) || (len(got) > 0 && !reflect.DeepEqual(got, want.Items)) {
			t.Errorf("items differ from the serializer's:\n got %+v\nwant %+v", got, want.Items)
		}
		if lm.ResourceVersion != want.ResourceVersion || lm.Continue != want.Continue {
			t.Errorf("list meta %+v, serializer's %+v", lm, want.ListMeta)
		}
	})
}
