package endpoints

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/svcproxy/svcproxy/internal/poll"
)

func TestRegisterDeliversEvents(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	client := fake.NewClientset(svcA(), sliceA1(readyEP("10.0.0.1")))
	inf := NewInformers(fakeClients(client), nil, RetryOptions{})
	tr := NewTracker(TrackerOptions{})
	hasSynced, err := RegisterSynced(inf, tr)
	if err != nil {
		t.Fatalf("RegisterSynced: %v", err)
	}
	inf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), hasSynced) {
		t.Fatal("handlers never synced")
	}

	// Initial list.
	if !tr.Pending() {
		t.Fatal("initial objects not delivered")
	}
	snap, changed, _ := tr.Take()
	if _, ok := changed[keyA]; !ok {
		t.Errorf("changed = %v, want a", changed)
	}
	if got := snap.Endpoints(portA.Name); len(got) != 1 || got[0] != readyAt("10.0.0.1", 8080) {
		t.Errorf("endpoints of a = %v", got)
	}

	// Add, update and delete through the API.
	if _, err := client.DiscoveryV1().EndpointSlices("ns").Create(ctx, sliceA2(readyEP("10.0.0.2")), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create slice: %v", err)
	}
	poll.Eventually(t, 10*time.Second, "slice add", func() (bool, string) {
		snap, _, _ = tr.Take()
		return len(snap.Endpoints(portA.Name)) == 2, fmt.Sprintf("endpoints %v", snap.Endpoints(portA.Name))
	})

	upd := svcA()
	upd.Spec.Ports[0].Port = 8000
	if _, err := client.CoreV1().Services("ns").Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update service: %v", err)
	}
	poll.Eventually(t, 10*time.Second, "service update", func() (bool, string) {
		snap, _, _ = tr.Take()
		return snap.Port(portA.Name).Port == 8000, fmt.Sprintf("port %d", snap.Port(portA.Name).Port)
	})

	if err := client.DiscoveryV1().EndpointSlices("ns").Delete(ctx, "a-1", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete slice: %v", err)
	}
	poll.Eventually(t, 10*time.Second, "slice delete", func() (bool, string) {
		snap, _, _ = tr.Take()
		eps := snap.Endpoints(portA.Name)
		return len(eps) == 1 && eps[0].Addr() == addr("10.0.0.2"), fmt.Sprintf("endpoints %v", eps)
	})

	if err := client.CoreV1().Services("ns").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete service: %v", err)
	}
	poll.Eventually(t, 10*time.Second, "service delete", func() (bool, string) {
		snap, _, _ = tr.Take()
		return snap.PortCount() == 0, fmt.Sprintf("%d Services", snap.PortCount())
	})
}

// fakeClients are the typed clients of a fake Clientset, which tells the
// reflector it cannot stream lists.
func fakeClients(c *fake.Clientset) Clients {
	return Clients{Core: c.CoreV1(), Discovery: c.DiscoveryV1(), WatchList: c}
}

// TestInformersSelectWatches: every Watch, not only every List, carries the
// caller's selectors.
func TestInformersSelectWatches(t *testing.T) {
	client := fake.NewClientset()
	var mu sync.Mutex
	watched := map[string]string{}
	client.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		mu.Lock()
		defer mu.Unlock()
		r := a.(k8stesting.WatchAction).GetWatchRestrictions()
		watched[a.GetResource().Resource] = r.Labels.String() + " " + r.Fields.String()
		return false, nil, nil
	})
	inf := NewInformers(fakeClients(client), func(o *metav1.ListOptions) {
		o.LabelSelector, o.FieldSelector = "a=b", "metadata.name=n"
	}, RetryOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inf.Start(ctx.Done())
	poll.Eventually(t, 10*time.Second, "both watches", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(watched) == 2, fmt.Sprint(watched)
	})
	mu.Lock()
	defer mu.Unlock()
	for _, res := range []string{"services", "endpointslices"} {
		if watched[res] != "a=b metadata.name=n" {
			t.Errorf("%s watched with %q, want the selectors", res, watched[res])
		}
	}
}

// TestRetryingInformersSyncThroughAnOutage: informers built by
// NewInformers list through five refused connections at once (the
// factory's own would back off 0.8+1.6+3.2+6.4 s at least), with the
// caller's label selector on every request.
func TestRetryingInformersSyncThroughAnOutage(t *testing.T) {
	client := fake.NewClientset(svcA(), sliceA1(readyEP("10.0.0.1")))
	var mu sync.Mutex
	refused := map[string]int{}
	selectors := map[string]string{}
	client.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		res := a.GetResource().Resource
		selectors[res] = a.(k8stesting.ListAction).GetListRestrictions().Labels.String()
		if refused[res] < 5 {
			refused[res]++
			return true, nil, errRefused
		}
		return false, nil, nil
	})
	const selector = "!service.kubernetes.io/service-proxy-name"
	inf := NewInformers(fakeClients(client), func(o *metav1.ListOptions) { o.LabelSelector = selector }, RetryOptions{Interval: time.Millisecond})
	tr := NewTracker(TrackerOptions{})
	hasSynced, err := RegisterSynced(inf, tr)
	if err != nil {
		t.Fatalf("RegisterSynced: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	inf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), hasSynced) {
		t.Fatalf("informers not synced within 2 s of five refused lists each")
	}
	snap, _, _ := tr.Take()
	if got := snap.Endpoints(portA.Name); len(got) != 1 {
		t.Errorf("endpoints of a = %v, want the listed slice", got)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, res := range []string{"services", "endpointslices"} {
		if refused[res] != 5 || selectors[res] != selector {
			t.Errorf("%s: %d refused lists, selector %q; want 5, %q", res, refused[res], selectors[res], selector)
		}
	}
}

// TestRegisterFeedsEveryFamily: one pair of informers feeds the IPv4 and the
// IPv6 tracker of a dual-stack node; each serves a dual-stack Service on its own
// family's ClusterIP with its own family's endpoints, and waits for both.
func TestRegisterFeedsEveryFamily(t *testing.T) {
	svc := makeService("ns", "a", "fd00:96::1", []v1.ServicePort{tcpPort("http", 80)}, func(s *v1.Service) {
		s.Spec.ClusterIPs = []string{"fd00:96::1", "10.96.0.1"} // IPv6-primary
	})
	six := makeSlice("ns", "a-6", "a", []discoveryv1.EndpointPort{slicePortOf("http", v1.ProtocolTCP, 8080)}, readyEP("fd00:244::2"))
	six.AddressType = discoveryv1.AddressTypeIPv6
	client := fake.NewClientset(svc, sliceA1(readyEP("10.244.0.2")), six)
	inf := NewInformers(fakeClients(client), nil, RetryOptions{})
	v4 := NewTracker(TrackerOptions{Family: IPv4})
	v6 := NewTracker(TrackerOptions{Family: IPv6})
	hasSynced, err := RegisterSynced(inf, v4, v6)
	if err != nil {
		t.Fatalf("RegisterSynced: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), hasSynced) {
		t.Fatal("handlers never synced")
	}
	for _, tc := range []struct {
		tr        *Tracker
		clusterIP string
		endpoint  Endpoint
	}{
		{v4, "10.96.0.1", readyAt("10.244.0.2", 8080)},
		{v6, "fd00:96::1", readyAt("fd00:244::2", 8080)},
	} {
		snap, _, _ := tc.tr.Take()
		name := spnOf(keyA, "http", "TCP")
		if got := snap.Port(name).ClusterIP; got != addr(tc.clusterIP) {
			t.Errorf("%s tracker: ClusterIP %v, want %s", tc.tr.family, got, tc.clusterIP)
		}
		if got := snap.Endpoints(name); len(got) != 1 || got[0] != tc.endpoint {
			t.Errorf("%s tracker: endpoints %v, want only %v", tc.tr.family, got, tc.endpoint)
		}
	}

	// A change reaches both.
	if err := client.CoreV1().Services("ns").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tr := range []*Tracker{v4, v6} {
		poll.Eventually(t, 10*time.Second, tr.family.String()+" delete", func() (bool, string) {
			snap, _, _ := tr.Take()
			return snap.PortCount() == 0, fmt.Sprintf("%d Services", snap.PortCount())
		})
	}
}

func TestRegisterNeedsATracker(t *testing.T) {
	inf := NewInformers(fakeClients(fake.NewClientset()), nil, RetryOptions{})
	if _, err := RegisterSynced(inf); err == nil {
		t.Fatal("RegisterSynced without a tracker: no error")
	}
}

// TestInformersRelistDeletesWhatIsGone: when a watch ends with 410 Gone, the
// reflector relists, and a Service deleted while no watch saw it leaves the
// tracker: the feed keeps no objects, but it knows their keys.
func TestInformersRelistDeletesWhatIsGone(t *testing.T) {
	client := fake.NewClientset(svcA(), svcB())
	var mu sync.Mutex
	var watchers []*watch.FakeWatcher
	client.PrependWatchReactor("services", func(k8stesting.Action) (bool, watch.Interface, error) {
		mu.Lock()
		defer mu.Unlock()
		w := watch.NewFake() // sees nothing the test does not send
		watchers = append(watchers, w)
		return true, w, nil
	})
	inf := NewInformers(fakeClients(client), nil, RetryOptions{})
	tr := NewTracker(TrackerOptions{})
	hasSynced, err := RegisterSynced(inf, tr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), hasSynced) {
		t.Fatal("never synced")
	}
	if snap, _, _ := tr.Take(); snap.PortCount() != 2 {
		t.Fatalf("%d Service ports listed, want a's and b's", snap.PortCount())
	}
	poll.Eventually(t, 10*time.Second, "a services watch", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(watchers) > 0, "no watch yet"
	})
	// b goes while no watch tells: only the relist can.
	if err := client.Tracker().Delete(v1.SchemeGroupVersion.WithResource("services"), "ns", "b"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	w := watchers[0]
	mu.Unlock()
	w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
	poll.Eventually(t, 10*time.Second, "b deleted by the relist", func() (bool, string) {
		snap, _, _ := tr.Take()
		hasA := snap.Port(portA.Name).Name == portA.Name
		hasB := snap.Port(portB.Name).Name == portB.Name
		return hasA && !hasB, fmt.Sprintf("a %v, b %v", hasA, hasB)
	})
}
