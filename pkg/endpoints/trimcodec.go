package endpoints

import (
	"bytes"
	"net/http"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// TrimmingRESTClient is a REST client of group version gv (at apiPath: "/api",
// "/apis") whose watches decode Services and EndpointSlices as the first List
// does: without what svcproxy never reads (see trimmer), so that a relist
// streamed as a watch-list, and every change, cost what the first List costs,
// and the trackers see the same objects whichever way they came.
func TrimmingRESTClient(cfg *rest.Config, httpClient *http.Client, gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion, cfg.APIPath = &gv, apiPath
	cfg.NegotiatedSerializer = trimmingSerializers{rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion()}
	return rest.RESTClientForConfigAndClient(cfg, httpClient)
}

// trimmingSerializers are the generated clients' serializers with the protobuf
// one's decoding trimmed.
type trimmingSerializers struct{ runtime.NegotiatedSerializer }

func (s trimmingSerializers) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := slices.Clone(s.NegotiatedSerializer.SupportedMediaTypes())
	for i := range infos {
		if infos[i].MediaType == runtime.ContentTypeProtobuf {
			infos[i].Serializer = &trimmingDecoder{Serializer: infos[i].Serializer}
		}
	}
	return infos
}

// trimmingDecoder trims the Services and EndpointSlices it decodes, in the API
// server's protobuf envelope (the magic, then a runtime.Unknown holding the
// object), and hands every object, trimmed or not, to the serializer it wraps.
// Anything it cannot read goes to that serializer whole.
type trimmingDecoder struct {
	runtime.Serializer

	mu  sync.Mutex // the buffers are one decode's; a watch decodes on its own goroutine
	t   trimmer
	buf []byte
}

func (d *trimmingDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if trimmed, ok := d.trimmed(data); ok {
		data = trimmed
	}
	return d.Serializer.Decode(data, defaults, into)
}

// trimmed is data with its object trimmed, if it is a Service or an
// EndpointSlice the trimmer reads.
func (d *trimmingDecoder) trimmed(data []byte) ([]byte, bool) {
	if !bytes.HasPrefix(data, protobufMagic[:]) {
		return nil, false
	}
	var unk runtime.Unknown
	if unk.Unmarshal(data[len(protobufMagic):]) != nil || unk.ContentEncoding != "" {
		return nil, false
	}
	var trim itemTrim
	switch unk.GroupVersionKind() {
	case v1.SchemeGroupVersion.WithKind("Service"):
		trim = (*trimmer).service
	case discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"):
		trim = (*trimmer).slice
	default:
		return nil, false
	}
	raw, err := trim(&d.t, unk.Raw)
	if err != nil {
		return nil, false
	}
	unk.Raw = raw
	d.buf = append(d.buf[:0], protobufMagic[:]...)
	b, err := unk.Marshal()
	if err != nil {
		return nil, false
	}
	d.buf = append(d.buf, b...)
	return d.buf, true
}
