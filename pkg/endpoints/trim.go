package endpoints

import (
	"encoding/binary"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Protobuf field numbers of what the trimmer passes over (k8s.io/api's and
// apimachinery's generated.proto).
const (
	// Service and EndpointSlice.
	fieldMetadata = 1
	// EndpointSlice.
	fieldSliceEndpoints = 2
	// ObjectMeta.
	fieldGenerateName    = 2
	fieldLabels          = 11
	fieldAnnotations     = 12
	fieldOwnerReferences = 13
	fieldFinalizers      = 14
	fieldManagedFields   = 17
	// Endpoint.
	fieldTargetRef          = 4
	fieldDeprecatedTopology = 5
	// A map entry.
	fieldMapKey = 1
)

// trimmer copies an item of a list, in the protobuf encoding, without the fields
// svcproxy never reads, before the generated unmarshaller turns it into objects:
// of every object's metadata, the managedFields, ownerReferences, finalizers,
// generateName, the annotations (but an EndpointSlice's trigger time, which the
// programming latency metric reads, and a watch-list's end: metaKept) and the labels but the one it reads (a
// Service's service-proxy-name, an EndpointSlice's service-name); of each
// endpoint, its targetRef and deprecatedTopology. On a cluster's objects those are
// most of the bytes and two fifths of the allocations (BenchmarkFeedIngest:
// Services as kubectl apply leaves them, EndpointSlices as the controller writes
// them, docs/bench.md). The first List uses it item by item, the watches through
// TrimmingRESTClient.
//
// Its buffers are reused from item to item: what it returns is valid until the
// next call, and the generated unmarshallers copy what they keep.
type trimmer struct {
	out, meta, nested []byte
	// endpointCount is how many endpoints the last object trimmed has.
	endpointCount int
	// endpointList is the endpoint list lent to each listed EndpointSlice;
	// lent: to the item being decoded.
	endpointList []discoveryv1.Endpoint
	lent         bool
}

// slice trims an EndpointSlice.
func (t *trimmer) slice(b []byte) ([]byte, error) {
	return t.object(b, metaKept{discoveryv1.LabelServiceName, v1.EndpointsLastChangeTriggerTime}, fieldSliceEndpoints)
}

// service trims a Service.
func (t *trimmer) service(b []byte) ([]byte, error) {
	return t.object(b, metaKept{label: LabelServiceProxyName}, 0)
}

// presize gives item (just reset, about to be unmarshalled from what t trimmed
// last) room for that object's endpoints: the generated unmarshaller appends
// them one by one, and the copies it leaves behind as the list doubles were a
// fifth of what a 100k cold start allocated (282 of 1445 MB, end to end). The
// room is the list the trimmer lends to every item in turn (see release).
func (t *trimmer) presize(item protoItem) {
	s, ok := item.(*discoveryv1.EndpointSlice)
	if !ok || t.endpointCount == 0 {
		return
	}
	if cap(t.endpointList) < t.endpointCount {
		t.endpointList = make([]discoveryv1.Endpoint, 0, t.endpointCount)
	}
	s.Endpoints, t.lent = t.endpointList[:0], true
}

// release takes back the endpoint list presize lent, cleared so that it holds
// on to nothing of the object it was lent to.
func (t *trimmer) release() {
	if t.lent {
		clear(t.endpointList[:t.endpointCount])
		t.lent = false
	}
}

// metaKept names the label and the annotation the trimmer keeps ("": none).
// Every object also keeps the annotation that ends a watch-list's initial events
// (metav1.InitialEventsAnnotationKey, on the bookmark that carries it): without
// it the reflector never ends a relist, and never deletes what the relist no
// longer lists (make soak's watch expiry found it).
type metaKept struct{ label, annotation string }

// object copies b (a Service or EndpointSlice) into t.out with its metadata
// trimmed and, when endpoints is not zero, each endpoint of that field trimmed.
func (t *trimmer) object(b []byte, keep metaKept, endpoints uint64) ([]byte, error) {
	t.out, t.endpointCount = t.out[:0], 0
	for len(b) > 0 {
		f, err := nextField(b)
		if err != nil {
			return nil, err
		}
		switch {
		case f.num == fieldMetadata && f.wire == wireBytes:
			if t.meta, err = trimMeta(t.meta[:0], f.val, keep); err != nil {
				return nil, fmt.Errorf("metadata: %w", err)
			}
			t.out = appendBytesField(t.out, f.num, t.meta)
		case f.num == endpoints && f.wire == wireBytes:
			if t.nested, err = dropFields(t.nested[:0], f.val, fieldTargetRef, fieldDeprecatedTopology); err != nil {
				return nil, fmt.Errorf("endpoint: %w", err)
			}
			t.out = appendBytesField(t.out, f.num, t.nested)
			t.endpointCount++
		default:
			t.out = append(t.out, f.raw...)
		}
		b = b[len(f.raw):]
	}
	return t.out, nil
}

// trimMeta appends ObjectMeta m to dst without what svcproxy never reads.
func trimMeta(dst, m []byte, keep metaKept) ([]byte, error) {
	for len(m) > 0 {
		f, err := nextField(m)
		if err != nil {
			return nil, err
		}
		switch f.num {
		case fieldManagedFields, fieldOwnerReferences, fieldFinalizers, fieldGenerateName:
		case fieldLabels:
			if f.wire == wireBytes && mapKeyIn(f.val, keep.label) {
				dst = append(dst, f.raw...)
			}
		case fieldAnnotations:
			if f.wire == wireBytes && mapKeyIn(f.val, metav1.InitialEventsAnnotationKey, keep.annotation) {
				dst = append(dst, f.raw...)
			}
		default:
			dst = append(dst, f.raw...)
		}
		m = m[len(f.raw):]
	}
	return dst, nil
}

// dropFields appends message m to dst without the fields numbered a and b.
func dropFields(dst, m []byte, a, b uint64) ([]byte, error) {
	for len(m) > 0 {
		f, err := nextField(m)
		if err != nil {
			return nil, err
		}
		if f.num != a && f.num != b {
			dst = append(dst, f.raw...)
		}
		m = m[len(f.raw):]
	}
	return dst, nil
}

// mapKeyIn reports whether map entry e's key is one of keys ("" matches none):
// its last key field, as the generated unmarshaller reads it.
func mapKeyIn(e []byte, keys ...string) bool {
	var key []byte
	for len(e) > 0 {
		f, err := nextField(e)
		if err != nil {
			return false
		}
		if f.num == fieldMapKey && f.wire == wireBytes {
			key = f.val
		}
		e = e[len(f.raw):]
	}
	for _, k := range keys {
		if k != "" && string(key) == k {
			return true
		}
	}
	return false
}

// wireField is one field of a message: raw is all of it (tag, length, value),
// val its value's bytes when it is length-delimited.
type wireField struct {
	num  uint64
	wire int
	raw  []byte
	val  []byte
}

var errWire = errors.New("malformed protobuf field")

// nextField reads the field that b starts with. Groups (wire types 3 and 4, which
// no Kubernetes type uses) are malformed here: the caller then leaves the item to
// the generated unmarshaller whole.
func nextField(b []byte) (wireField, error) {
	tag, n := binary.Uvarint(b)
	if n <= 0 || tag>>3 == 0 {
		return wireField{}, errWire
	}
	f := wireField{num: tag >> 3, wire: int(tag & 7)}
	switch f.wire {
	case wireVarint:
		_, m := binary.Uvarint(b[n:])
		if m <= 0 {
			return wireField{}, errWire
		}
		n += m
	case wireFixed64:
		n += 8
	case wireFixed32:
		n += 4
	case wireBytes:
		l, m := binary.Uvarint(b[n:])
		if m <= 0 || l > uint64(len(b)-n-m) {
			return wireField{}, errWire
		}
		n += m
		f.val = b[n : n+int(l)]
		n += int(l)
	default:
		return wireField{}, errWire
	}
	if n > len(b) {
		return wireField{}, errWire
	}
	f.raw = b[:n]
	return f, nil
}

// appendBytesField appends a length-delimited field.
func appendBytesField(dst []byte, num uint64, val []byte) []byte {
	dst = binary.AppendUvarint(dst, num<<3|wireBytes)
	dst = binary.AppendUvarint(dst, uint64(len(val)))
	return append(dst, val...)
}
