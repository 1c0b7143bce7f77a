package endpoints

import (
	"context"
	"fmt"
	"sync"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	typednetworkingv1 "k8s.io/client-go/kubernetes/typed/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// notServedRetry is how often a List of ServiceCIDRs that the API server does not
// serve is tried again: an upgraded control plane starts serving them, and the
// drops follow within this long without a restart.
const notServedRetry = time.Minute

// ServiceCIDRInformer lists and watches ServiceCIDRs (networking.k8s.io/v1) into a
// ServiceCIDRTracker, like the Service and EndpointSlice informers: a reflector
// into a feed, no cache, retried through API server outages.
type ServiceCIDRInformer struct {
	feed *feed
	refl *cache.Reflector
}

// ServiceCIDROptions tune NewServiceCIDRInformer; zero fields take the defaults.
type ServiceCIDROptions struct {
	RetryOptions
	// WatchList is what the reflector asks whether the client can stream lists
	// (see Clients.WatchList).
	WatchList any
	// NotServedRetry replaces notServedRetry (tests).
	NotServedRetry time.Duration
	// OnNotServed, if set, is called once when the API server answers that it
	// does not serve ServiceCIDRs (klog's line otherwise).
	OnNotServed func(error)
}

// NewServiceCIDRInformer builds the reflector; Start runs it.
//
// An API server that does not serve ServiceCIDRs (before Kubernetes 1.33, where the
// API was beta and off by default) answers the List with NotFound. kube-proxy's
// informer then fails every List with client-go's backoff and an error line each
// time, and its proxier programs no drop. Here the first such answer is logged once
// (OnNotServed), the List is retried quietly every NotServedRetry and the reflector
// never sees the error: the proxies run without drops until it is served.
func NewServiceCIDRInformer(c typednetworkingv1.ServiceCIDRsGetter, t *ServiceCIDRTracker, o ServiceCIDROptions) *ServiceCIDRInformer {
	if o.NotServedRetry <= 0 {
		o.NotServedRetry = notServedRetry
	}
	if o.OnNotServed == nil {
		o.OnNotServed = func(err error) {
			klog.InfoS("The API server does not serve ServiceCIDRs (networking.k8s.io/v1); traffic to unallocated service addresses is not dropped", "err", err)
		}
	}
	f := newFeed(KindServiceCIDR)
	f.upserts = append(f.upserts, func(obj any) {
		if sc, ok := obj.(*networkingv1.ServiceCIDR); ok {
			t.OnAdd(sc)
		} else {
			t.OnDeleteObj(obj) // reports the unexpected type
		}
	})
	f.deletes = append(f.deletes, t.OnDeleteObj)
	f.holders = append(f.holders, t.held)
	ns := &notServed{retry: o.NotServedRetry, report: o.OnNotServed}
	refl := reflectorInto(o.WatchList, false, f, &networkingv1.ServiceCIDR{}, "ServiceCIDRs", o.RetryOptions,
		func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return ns.list(ctx, func() (runtime.Object, error) { return c.ServiceCIDRs().List(ctx, opts) })
		},
		func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.ServiceCIDRs().Watch(ctx, opts)
		})
	return &ServiceCIDRInformer{feed: f, refl: refl}
}

// Start runs the reflector until stop is closed.
func (i *ServiceCIDRInformer) Start(stop <-chan struct{}) { go i.refl.Run(stop) }

// HasSynced reports whether the first list reached the tracker. The proxies do not
// wait for it, as kube-proxy's do not: the drops are added when it arrives.
func (i *ServiceCIDRInformer) HasSynced() bool { return i.feed.hasSynced() }

// notServed turns "the API server does not serve this resource" into a List that
// waits, logged once.
type notServed struct {
	retry  time.Duration
	report func(error)
	once   sync.Once
}

// list calls f until it answers something other than NotFound, or ctx ends.
func (n *notServed) list(ctx context.Context, f func() (runtime.Object, error)) (runtime.Object, error) {
	for {
		obj, err := f()
		if err == nil || !apierrors.IsNotFound(err) {
			return obj, err
		}
		n.once.Do(func() { n.report(err) })
		t := time.NewTimer(n.retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("list ServiceCIDRs: %w", err)
		case <-t.C:
		}
	}
}
