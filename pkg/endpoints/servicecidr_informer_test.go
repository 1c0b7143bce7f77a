package endpoints

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/svcproxy/svcproxy/internal/poll"
)

// TestServiceCIDRInformer: the initial list and later creations and deletions
// through the API reach the tracker.
func TestServiceCIDRInformer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(serviceCIDR("kubernetes", "10.96.0.0/16"))
	tr := NewServiceCIDRTracker(ServiceCIDRTrackerOptions{})
	inf := NewServiceCIDRInformer(client.NetworkingV1(), tr, ServiceCIDROptions{WatchList: client})
	inf.Start(ctx.Done())
	poll.Eventually(t, 10*time.Second, "initial list", func() (bool, string) {
		got := tr.CIDRs(IPv4)
		return inf.HasSynced() && slices.Equal(got, prefixes("10.96.0.0/16")), fmt.Sprint(got)
	})
	if _, err := client.NetworkingV1().ServiceCIDRs().Create(ctx, serviceCIDR("extra", "10.97.0.0/24", "fd00:97::/112"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 10*time.Second, "create", func() (bool, string) {
		v4, v6 := tr.CIDRs(IPv4), tr.CIDRs(IPv6)
		return slices.Equal(v4, prefixes("10.96.0.0/16", "10.97.0.0/24")) && slices.Equal(v6, prefixes("fd00:97::/112")), fmt.Sprint(v4, v6)
	})
	if err := client.NetworkingV1().ServiceCIDRs().Delete(ctx, "kubernetes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 10*time.Second, "delete", func() (bool, string) {
		got := tr.CIDRs(IPv4)
		return slices.Equal(got, prefixes("10.97.0.0/24")), fmt.Sprint(got)
	})
}

// TestServiceCIDRInformerNotServed: an API server that answers NotFound (it does
// not serve the resource) is reported once however often the List is retried,
// and the informer picks the objects up once it serves them.
func TestServiceCIDRInformerNotServed(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(serviceCIDR("kubernetes", "10.96.0.0/16"))
	var served atomic.Bool
	var lists atomic.Int32
	client.PrependReactor("list", "servicecidrs", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		if served.Load() {
			return false, nil, nil
		}
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "networking.k8s.io", Resource: "servicecidrs"}, "")
	})
	var mu sync.Mutex
	var reports []error
	tr := NewServiceCIDRTracker(ServiceCIDRTrackerOptions{})
	inf := NewServiceCIDRInformer(client.NetworkingV1(), tr, ServiceCIDROptions{WatchList: client, NotServedRetry: 5 * time.Millisecond,
		OnNotServed: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			reports = append(reports, err)
		}})
	inf.Start(ctx.Done())
	poll.Eventually(t, 10*time.Second, "several Lists refused", func() (bool, string) {
		return lists.Load() >= 5, fmt.Sprintf("%d lists", lists.Load())
	})
	if inf.HasSynced() || len(tr.CIDRs(IPv4)) != 0 {
		t.Fatalf("synced %v with CIDRs %v while not served", inf.HasSynced(), tr.CIDRs(IPv4))
	}
	served.Store(true)
	poll.Eventually(t, 10*time.Second, "served later", func() (bool, string) {
		got := tr.CIDRs(IPv4)
		return slices.Equal(got, prefixes("10.96.0.0/16")), fmt.Sprint(got)
	})
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 1 || !apierrors.IsNotFound(reports[0]) {
		t.Errorf("reports %v, want one NotFound", reports)
	}
}
