package endpoints

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	typeddiscoveryv1 "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// Clients are the typed API clients the informers use: only these two
// groups, not client-go's whole Clientset, whose every API group svcproxy
// would otherwise compile (and a fresh clone wait for).
type Clients struct {
	Core      typedcorev1.ServicesGetter
	Discovery typeddiscoveryv1.EndpointSlicesGetter
	// WatchList is what the reflector asks whether the client can stream
	// lists (watchlist.DoesClientNotSupportWatchListSemantics); nil for a
	// real client, which can. The fake Clientset cannot, and says so.
	WatchList any
}

// Informers are the core/v1 Service and discovery/v1 EndpointSlice informers
// svcproxy watches the cluster with.
type Informers struct {
	Services       cache.SharedIndexInformer
	EndpointSlices cache.SharedIndexInformer
}

// NewInformers builds the Service and EndpointSlice informers on a
// RetryingListerWatcher, so that they resume within o.Interval of an API
// server outage instead of after client-go's backoff of up to a minute.
// tweak (may be nil) edits every List and Watch request (label and field
// selectors); resync is the informers' resync period.
func NewInformers(c Clients, resync time.Duration, tweak func(*metav1.ListOptions), o RetryOptions) Informers {
	if tweak == nil {
		tweak = func(*metav1.ListOptions) {}
	}
	return Informers{
		Services: retryingInformer(c.WatchList, &v1.Service{}, "Services", resync, o,
			func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				tweak(&opts)
				return c.Core.Services(metav1.NamespaceAll).List(ctx, opts)
			},
			func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				tweak(&opts)
				return c.Core.Services(metav1.NamespaceAll).Watch(ctx, opts)
			}),
		EndpointSlices: retryingInformer(c.WatchList, &discoveryv1.EndpointSlice{}, "EndpointSlices", resync, o,
			func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				tweak(&opts)
				return c.Discovery.EndpointSlices(metav1.NamespaceAll).List(ctx, opts)
			},
			func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				tweak(&opts)
				return c.Discovery.EndpointSlices(metav1.NamespaceAll).Watch(ctx, opts)
			}),
	}
}

// Start runs both informers until stop is closed.
func (i Informers) Start(stop <-chan struct{}) {
	go i.Services.Run(stop)
	go i.EndpointSlices.Run(stop)
}

// retryingInformer is what client-go's generated informer constructors
// build (namespace index included), on a RetryingListerWatcher, keeping
// trimmed copies of the objects (TrimObject).
func retryingInformer(client any, obj runtime.Object, what string, resync time.Duration, o RetryOptions,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFunc func(context.Context, metav1.ListOptions) (watch.Interface, error),
) cache.SharedIndexInformer {
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watchFunc}, client)
	inf := cache.NewSharedIndexInformerWithOptions(RetryingListerWatcher(lw, what, o), obj, cache.SharedIndexInformerOptions{
		ResyncPeriod: resync,
		Indexers:     cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
	})
	// The cache holds every object for as long as svcproxy runs: only what it reads.
	// SetTransform fails only on a started informer, and this one is not.
	_ = inf.SetTransform(TrimObject)
	return inf
}

// RegisterSynced wires the Service and EndpointSlice informers to t and
// returns a function that reports whether both handlers have received their
// informer's initial list. Call it before Start so the initial lists are
// delivered. A sync loop should wait for hasSynced before its first Take;
// rendering earlier would remove rules for Services that simply have not
// been listed yet.
func RegisterSynced(i Informers, t *Tracker) (hasSynced func() bool, err error) {
	svcReg, err := i.Services.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if svc, ok := obj.(*v1.Service); ok {
				t.OnServiceAdd(svc)
			} else {
				t.reportUnexpected(KindService, obj)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			svc, ok := newObj.(*v1.Service)
			if !ok {
				t.reportUnexpected(KindService, newObj)
				return
			}
			old, _ := oldObj.(*v1.Service)
			t.OnServiceUpdate(old, svc)
		},
		DeleteFunc: t.OnServiceDeleteObj,
	})
	if err != nil {
		return nil, fmt.Errorf("register Service event handler: %w", err)
	}
	sliceReg, err := i.EndpointSlices.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
				t.OnEndpointSliceAdd(s)
			} else {
				t.reportUnexpected(KindEndpointSlice, obj)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			s, ok := newObj.(*discoveryv1.EndpointSlice)
			if !ok {
				t.reportUnexpected(KindEndpointSlice, newObj)
				return
			}
			old, _ := oldObj.(*discoveryv1.EndpointSlice)
			t.OnEndpointSliceUpdate(old, s)
		},
		DeleteFunc: t.OnEndpointSliceDeleteObj,
	})
	if err != nil {
		return nil, fmt.Errorf("register EndpointSlice event handler: %w", err)
	}
	return func() bool { return svcReg.HasSynced() && sliceReg.HasSynced() }, nil
}
