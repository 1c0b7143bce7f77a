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
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// UseRetryingInformers makes factory build its core/v1 Service and
// discovery/v1 EndpointSlice informers on a RetryingListerWatcher, so that
// they resume within o.Interval of an API server outage instead of after
// client-go's backoff of up to a minute. tweak (may be nil) edits every List
// and Watch request, as the factory's WithTweakListOptions would (which
// informers built here do not see). Call it before Register.
func UseRetryingInformers(factory informers.SharedInformerFactory, tweak func(*metav1.ListOptions), o RetryOptions) {
	if tweak == nil {
		tweak = func(*metav1.ListOptions) {}
	}
	factory.InformerFor(&v1.Service{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return retryingInformer(c, &v1.Service{}, "Services", resync, o,
			func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				tweak(&opts)
				return c.CoreV1().Services(metav1.NamespaceAll).List(ctx, opts)
			},
			func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				tweak(&opts)
				return c.CoreV1().Services(metav1.NamespaceAll).Watch(ctx, opts)
			})
	})
	factory.InformerFor(&discoveryv1.EndpointSlice{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return retryingInformer(c, &discoveryv1.EndpointSlice{}, "EndpointSlices", resync, o,
			func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				tweak(&opts)
				return c.DiscoveryV1().EndpointSlices(metav1.NamespaceAll).List(ctx, opts)
			},
			func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				tweak(&opts)
				return c.DiscoveryV1().EndpointSlices(metav1.NamespaceAll).Watch(ctx, opts)
			})
	})
}

// retryingInformer is what client-go's generated constructors build, on a
// RetryingListerWatcher.
func retryingInformer(c kubernetes.Interface, obj runtime.Object, what string, resync time.Duration, o RetryOptions,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFunc func(context.Context, metav1.ListOptions) (watch.Interface, error),
) cache.SharedIndexInformer {
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watchFunc}, c)
	return cache.NewSharedIndexInformerWithOptions(RetryingListerWatcher(lw, what, o), obj, cache.SharedIndexInformerOptions{
		ResyncPeriod: resync,
		Indexers:     cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
	})
}

// Register wires the factory's core/v1 Service and discovery/v1 EndpointSlice
// informers to t. Call it before factory.Start so the initial lists are
// delivered. Callers may also filter out Services labelled
// LabelServiceProxyName with the factory's list options; the tracker checks
// again anyway.
func Register(factory informers.SharedInformerFactory, t *Tracker) error {
	_, err := RegisterSynced(factory, t)
	return err
}

// RegisterSynced is Register, also returning a function that reports whether
// both handlers have received their informer's initial list. A sync loop
// should wait for it before its first Take; rendering earlier would remove
// rules for Services that simply have not been listed yet.
func RegisterSynced(factory informers.SharedInformerFactory, t *Tracker) (hasSynced func() bool, err error) {
	svcReg, err := factory.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
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
	sliceReg, err := factory.Discovery().V1().EndpointSlices().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
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
