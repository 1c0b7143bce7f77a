package endpoints

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	typeddiscoveryv1 "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/rest"
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
	// CoreREST and DiscoveryREST, when set, serve the Lists as streams,
	// decoded and delivered object by object (streamList), and the watches,
	// decoded by the client's own serializers (TrimmingRESTClient's trim
	// what svcproxy never reads); nil for the fake Clientset, whose typed List
	// and Watch are used.
	CoreREST, DiscoveryREST rest.Interface
	// StreamFirstList makes the first list of Services and EndpointSlices a
	// watch-list, as kube-proxy's informers do, where the client can stream
	// lists; by default it is a List from the watch cache (errListFirst).
	// For comparing the two at fleet scale (TestBenchFleet in test/e2e).
	StreamFirstList bool
}

// Informers watch Services and EndpointSlices for svcproxy: one reflector per
// kind, like an informer's, but writing into a feed instead of a cache, so
// that the only copy of what svcproxy reads is the trackers' (see feed).
type Informers struct {
	services, slices         *feed
	servicesRefl, slicesRefl *cache.Reflector
}

// NewInformers builds the Service and EndpointSlice reflectors on a
// RetryingListerWatcher, so that they resume within o.Interval of an API
// server outage instead of after client-go's backoff of up to a minute.
// tweak (may be nil) edits every List and Watch request (label and field
// selectors). There is no resync period: with no cache there is nothing to
// re-deliver, and the trackers would drop every resynced object as unchanged.
func NewInformers(c Clients, tweak func(*metav1.ListOptions), o RetryOptions) Informers {
	if tweak == nil {
		tweak = func(*metav1.ListOptions) {}
	}
	i := Informers{services: newFeed(KindService), slices: newFeed(KindEndpointSlice)}
	i.servicesRefl = reflectorInto(c.WatchList, c.StreamFirstList, i.services, &v1.Service{}, "Services", o,
		func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			tweak(&opts)
			if c.CoreREST != nil {
				return streamList(ctx, c.CoreREST, serviceLists, opts, i.services.upsert)
			}
			return c.Core.Services(metav1.NamespaceAll).List(ctx, opts)
		},
		func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			tweak(&opts)
			if c.CoreREST != nil {
				return restWatch(ctx, c.CoreREST, serviceLists, opts)
			}
			return c.Core.Services(metav1.NamespaceAll).Watch(ctx, opts)
		})
	i.slicesRefl = reflectorInto(c.WatchList, c.StreamFirstList, i.slices, &discoveryv1.EndpointSlice{}, "EndpointSlices", o,
		func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			tweak(&opts)
			if c.DiscoveryREST != nil {
				return streamList(ctx, c.DiscoveryREST, sliceLists, opts, i.slices.upsert)
			}
			return c.Discovery.EndpointSlices(metav1.NamespaceAll).List(ctx, opts)
		},
		func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			tweak(&opts)
			if c.DiscoveryREST != nil {
				return restWatch(ctx, c.DiscoveryREST, sliceLists, opts)
			}
			return c.Discovery.EndpointSlices(metav1.NamespaceAll).Watch(ctx, opts)
		})
	return i
}

// Start runs both reflectors until stop is closed.
func (i Informers) Start(stop <-chan struct{}) {
	go i.servicesRefl.Run(stop)
	go i.slicesRefl.Run(stop)
}

// reflectorInto lists and watches one kind into f: objects delivered as they
// arrive (a watch-list stream through f's Transformer, else a paged list),
// each request retried through outages (RetryingListerWatcher); the first list
// is a List even where the client streams lists (pagedLister), unless
// streamFirst.
func reflectorInto(client any, streamFirst bool, f *feed, obj runtime.Object, what string, o RetryOptions,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFunc func(context.Context, metav1.ListOptions) (watch.Interface, error),
) *cache.Reflector {
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watchFunc}, client)
	retrying := RetryingListerWatcher(lw, what, o)
	paged := &pagedLister{lw: retrying, deliver: f.upsert, pageSize: listPageSize, streamFirst: streamFirst}
	return cache.NewReflectorWithOptions(paged, obj, f, cache.ReflectorOptions{Name: "svcproxy " + what, TypeDescription: what})
}

// RegisterSynced wires the Service and EndpointSlice reflectors to every tracker
// (one per IP family a dual-stack node serves: the same objects, each tracker
// keeping what belongs to its family) and returns a function that reports
// whether every tracker has received both initial lists. Call it before Start.
// A sync loop should wait for hasSynced before its first Take; rendering
// earlier would remove rules for Services that simply have not been listed yet.
func RegisterSynced(i Informers, trackers ...*Tracker) (hasSynced func() bool, err error) {
	if len(trackers) == 0 {
		return nil, fmt.Errorf("register informer handlers: no tracker")
	}
	for _, t := range trackers {
		i.services.upserts = append(i.services.upserts, func(obj any) {
			if svc, ok := obj.(*v1.Service); ok {
				t.OnServiceAdd(svc)
			} else {
				t.reportUnexpected(KindService, obj)
			}
		})
		i.services.deletes = append(i.services.deletes, t.OnServiceDeleteObj)
		i.services.holders = append(i.services.holders, t.heldServices)
		i.slices.upserts = append(i.slices.upserts, func(obj any) {
			if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
				t.OnEndpointSliceAdd(s)
			} else {
				t.reportUnexpected(KindEndpointSlice, obj)
			}
		})
		i.slices.deletes = append(i.slices.deletes, t.OnEndpointSliceDeleteObj)
		i.slices.holders = append(i.slices.holders, t.heldSlices)
	}
	return func() bool { return i.services.hasSynced() && i.slices.hasSynced() }, nil
}

// RegisterFuncs wires plain functions instead of trackers: upsert gets every
// Service and EndpointSlice delivered, del every deletion a watch reports (a
// relist deletes nothing: the functions hold nothing the feed could ask for).
// It is for the fleet benchmark (TestBenchFleet in test/e2e), where hundreds
// of simulated proxies in one process count what they receive instead of
// keeping it: a tracker each would not fit in memory. Call it before Start;
// hasSynced reports both initial lists delivered.
func RegisterFuncs(i Informers, upsert, del func(obj any)) (hasSynced func() bool) {
	i.services.upserts = append(i.services.upserts, upsert)
	i.services.deletes = append(i.services.deletes, del)
	i.slices.upserts = append(i.slices.upserts, upsert)
	i.slices.deletes = append(i.slices.deletes, del)
	return func() bool { return i.services.hasSynced() && i.slices.hasSynced() }
}
