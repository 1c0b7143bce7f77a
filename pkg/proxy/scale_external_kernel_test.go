package proxy

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// TestKernelScaleExternal times, against the kernel, a cold sync and one endpoint
// replaced at SVCPROXY_SCALE_EXTERNAL Services x 10 endpoints, ClusterIP only and with
// a third of the Services NodePorts (every sixth also an external IP), as make bench
// will once hack/bench grows external Services. Skipped unless the variable is set:
//
//	SVCPROXY_SCALE_EXTERNAL=10000 SVCPROXY_SCALE_ONLY=external go test -count=1 -run TestKernelScaleExternal -v ./pkg/proxy/
func TestKernelScaleExternal(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SVCPROXY_SCALE_EXTERNAL"))
	if n == 0 {
		t.Skip("a benchmark: set SVCPROXY_SCALE_EXTERNAL=10000 to run it")
	}
	for _, external := range []bool{false, true} {
		// SVCPROXY_SCALE_ONLY=cluster or =external runs one variant (one process each
		// keeps the other's table and heap out of the measurement).
		if only := os.Getenv("SVCPROXY_SCALE_ONLY"); only != "" && (only == "external") != external {
			continue
		}
		ns := netnstest.New(t, "scale")
		tr := endpoints.NewTracker(endpoints.TrackerOptions{})
		for i := 0; i < n; i++ {
			tr.OnServiceAdd(scaleService(i, external))
			tr.OnEndpointSliceAdd(scaleSlice(i, 0))
		}
		p := New(Config{Tracker: tr, Kernel: &nft.Netlink{NetNSFd: ns.Fd}, Options: Options{ClusterCIDR: podCIDR, NodeName: "node-a"}})
		// CPU time (user + system: the kernel handles the transaction in our context)
		// beside wall time: on a shared machine it moves far less with the load.
		start, cpu0 := time.Now(), processCPU()
		if err := p.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		cold, coldCPU := time.Since(start), processCPU()-cpu0
		var changes, changesCPU []time.Duration
		for s := 1; s <= 7; s++ {
			tr.OnEndpointSliceUpdate(nil, scaleSlice(s*3%n, s)) // a NodePort Service when external
			start, cpu0 := time.Now(), processCPU()
			if err := p.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			changes, changesCPU = append(changes, time.Since(start)), append(changesCPU, processCPU()-cpu0)
		}
		slices.Sort(changes)
		slices.Sort(changesCPU)
		t.Logf("%d Services x10, external=%v: cold sync %.2f s (CPU %.2f s), one endpoint replaced (median of 7) %.1f ms (CPU %.1f ms), elements %d",
			n, external, cold.Seconds(), coldCPU.Seconds(), float64(changes[3].Microseconds())/1000, float64(changesCPU[3].Microseconds())/1000,
			len(p.Desired().Elements()))
	}
}

func scaleService(i int, external bool) *v1.Service {
	ip := fmt.Sprintf("10.%d.%d.%d", 96+i>>16, (i>>8)&0xff, i&0xff)
	s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "svc-" + strconv.Itoa(i)},
		Spec: v1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}, Type: v1.ServiceTypeClusterIP,
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}}}
	if external && i%3 == 0 {
		if os.Getenv("SVCPROXY_SCALE_NO_NODEPORT") == "" {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = int32(30000 + i/3)
		}
		if i%6 == 0 && os.Getenv("SVCPROXY_SCALE_NO_EXTERNALIP") == "" {
			s.Spec.ExternalIPs = []string{fmt.Sprintf("172.%d.%d.%d", 16+i>>16, (i>>8)&0xff, i&0xff)}
		}
	}
	return s
}

func scaleSlice(i, gen int) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "bench", Name: "svc-" + strconv.Itoa(i) + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: "svc-" + strconv.Itoa(i)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	for j := 0; j < 10; j++ {
		k := i*10 + j
		if j == 0 && gen > 0 {
			k = 1<<20 + gen*4096 + i%4096
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", 128+k>>16, (k>>8)&0xff, k&0xff)}})
	}
	return s
}
