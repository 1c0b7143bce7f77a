package endpoints

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/svcproxy/svcproxy/internal/poll"
)

// TestStreamFirstListOption: by default the first request of either
// reflector is a List (the watch-list it tries first is refused, errListFirst);
// with Clients.StreamFirstList it is a watch-list, as kube-proxy's informers
// start. The fake Clientset is told to claim it can stream lists (WatchList
// nil), so that the reflector tries.
func TestStreamFirstListOption(t *testing.T) {
	for _, tc := range []struct {
		streamFirst bool
		want        string
	}{
		{false, "list"},
		{true, "watch-list"},
	} {
		t.Run(fmt.Sprint("StreamFirstList=", tc.streamFirst), func(t *testing.T) {
			client := fake.NewClientset()
			var mu sync.Mutex
			first := map[string]string{} // resource: its first request
			record := func(res, what string) {
				mu.Lock()
				defer mu.Unlock()
				if _, ok := first[res]; !ok {
					first[res] = what
				}
			}
			client.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
				record(a.GetResource().Resource, "list")
				return false, nil, nil
			})
			client.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
				o := a.(k8stesting.WatchActionImpl).GetListOptions()
				what := "watch"
				if o.SendInitialEvents != nil && *o.SendInitialEvents {
					what = "watch-list"
				}
				record(a.GetResource().Resource, what)
				return false, nil, nil
			})
			c := Clients{Core: client.CoreV1(), Discovery: client.DiscoveryV1(), StreamFirstList: tc.streamFirst}
			inf := NewInformers(c, nil, RetryOptions{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			inf.Start(ctx.Done())
			poll.Eventually(t, 10*time.Second, "both first requests", func() (bool, string) {
				mu.Lock()
				defer mu.Unlock()
				return len(first) == 2, fmt.Sprint(first)
			})
			mu.Lock()
			defer mu.Unlock()
			for _, res := range []string{"services", "endpointslices"} {
				if first[res] != tc.want {
					t.Errorf("%s: first request a %s, want a %s", res, first[res], tc.want)
				}
			}
		})
	}
}

// TestRegisterFuncsCounts: the plain functions get every listed Service and
// EndpointSlice, and hasSynced turns true once both lists are in.
func TestRegisterFuncsCounts(t *testing.T) {
	client := fake.NewClientset(svcA(), sliceA1(readyEP("10.0.0.1")), sliceA2(readyEP("10.0.0.2")))
	inf := NewInformers(fakeClients(client), nil, RetryOptions{})
	var mu sync.Mutex
	kinds := map[string]int{}
	synced := RegisterFuncs(inf, func(obj any) {
		mu.Lock()
		defer mu.Unlock()
		kinds[fmt.Sprintf("%T", obj)]++
	}, func(any) { t.Error("a deletion on a first list") })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		t.Fatal("never synced")
	}
	mu.Lock()
	defer mu.Unlock()
	if kinds["*v1.Service"] != 1 || kinds["*v1.EndpointSlice"] != 2 || len(kinds) != 2 {
		t.Errorf("delivered %v, want 1 Service and 2 EndpointSlices", kinds)
	}
}
