package endpoints

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// listedKind is what streamList needs to know of a resource.
type listedKind struct {
	resource, kind string // "services", "ServiceList"
	item           func() protoItem
	trim           itemTrim
	list           func() runtime.Object // for a list in another encoding
}

var (
	serviceLists = listedKind{"services", "ServiceList",
		func() protoItem { return &v1.Service{} }, (*trimmer).service, func() runtime.Object { return &v1.ServiceList{} }}
	sliceLists = listedKind{"endpointslices", "EndpointSliceList",
		func() protoItem { return &discoveryv1.EndpointSlice{} }, (*trimmer).slice, func() runtime.Object { return &discoveryv1.EndpointSliceList{} }}
)

// streamList lists k through rc and delivers each object as it is decoded
// from the response body, returning only their keys at the list's resource
// version, like pagedLister. It is how a List is served when the
// client has a REST interface (not the fake Clientset).
func streamList(ctx context.Context, rc rest.Interface, k listedKind, opts metav1.ListOptions, deliver func(any) error) (*keyList, error) {
	body, err := rc.Get().Resource(k.resource).VersionedParams(&opts, scheme.ParameterCodec).Timeout(requestTimeout(opts)).Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	out := &keyList{}
	each := func(obj runtime.Object) error { return out.add(obj, deliver) }
	r := bufio.NewReaderSize(body, 64<<10)
	lm, err := decodeProtobufList(r, k.kind, k.item, k.trim, each)
	if errors.Is(err, errNotProtobuf) {
		// JSON or CBOR, as --kube-api-content-type asked: decoded whole.
		lm, err = decodeWholeList(r, k.list(), each)
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", k.resource, err)
	}
	out.ListMeta = lm
	return out, nil
}

// restWatch watches k through rc, as the typed client's Watch does, decoded by
// rc's serializers.
func restWatch(ctx context.Context, rc rest.Interface, k listedKind, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return rc.Get().Resource(k.resource).VersionedParams(&opts, scheme.ParameterCodec).Timeout(requestTimeout(opts)).Watch(ctx)
}

// requestTimeout is the client-side timeout the typed clients set from opts.
func requestTimeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}

// decodeWholeList decodes into list a list in any encoding the client
// understands and hands each item to each.
func decodeWholeList(r io.Reader, list runtime.Object, each func(runtime.Object) error) (metav1.ListMeta, error) {
	var lm metav1.ListMeta
	data, err := io.ReadAll(r)
	if err != nil {
		return lm, unexpected(err)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, list)
	if err != nil {
		return lm, err
	}
	la, err := meta.ListAccessor(obj)
	if err != nil {
		return lm, err
	}
	lm.ResourceVersion, lm.Continue, lm.RemainingItemCount = la.GetResourceVersion(), la.GetContinue(), la.GetRemainingItemCount()
	return lm, meta.EachListItem(obj, each)
}
