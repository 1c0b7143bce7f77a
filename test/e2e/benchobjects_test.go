//go:build e2e

package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcproxy/svcproxy/internal/benchworld"
)

// The side-by-side benchmark's objects: Service b-i in namespace bench, ClusterIP
// benchClusterIP(i) port 80, no selector, and its EndpointSlice b-i with
// benchEndpointsPerService endpoints on port 8080 in benchworld.EndpointPf, which
// the bench world's pods namespace answers.
const (
	benchNS                  = "bench"
	benchEndpointsPerService = 10
	benchNodeName            = "svcproxy-bench"
	benchNodeIP              = "172.18.0.50"
	// benchNodes is how many nodes the endpoints are spread over, as the
	// EndpointSlice controller names every pod's node: one in benchNodes is the
	// proxy's (the in-process bench's -nodes default).
	benchNodes = 100
)

// benchEndpointNode is the node endpoint j of Service i at gen runs on.
func benchEndpointNode(i, j, gen int) *string {
	k := i*benchEndpointsPerService + j
	if gen > 0 {
		k = gen<<8 + j
	}
	n := benchNodeName
	if k%benchNodes != 0 {
		n = fmt.Sprintf("bench-node-%d", k%benchNodes)
	}
	return &n
}

func ipFrom(base netip.Addr, off int) netip.Addr {
	b := base.As4()
	v := binary.BigEndian.Uint32(b[:]) + uint32(off)
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// benchClusterIP leaves the low addresses of the service CIDR (the kubernetes
// Service's 10.96.0.1 among them) to the apiserver.
func benchClusterIP(i int) netip.Addr { return ipFrom(netip.MustParseAddr("10.96.4.0"), i) }

// benchEndpoint is endpoint j of Service i; gen > 0 is the gen-th replacement of
// all of them (a change), in a range of its own.
func benchEndpoint(i, j, gen int) netip.Addr {
	if gen > 0 {
		return ipFrom(netip.MustParseAddr("10.170.0.0"), gen<<8+j)
	}
	return ipFrom(netip.MustParseAddr("10.128.0.0"), i*benchEndpointsPerService+j)
}

func benchService(i int) *corev1.Service {
	ip := benchClusterIP(i).String()
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("b-%d", i), Namespace: benchNS},
		Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(benchworld.Port)}}},
	}
}

func benchSlice(i, gen int) *discoveryv1.EndpointSlice {
	name, proto, port := "http", corev1.ProtocolTCP, int32(benchworld.Port)
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("b-%d", i), Namespace: benchNS, Labels: map[string]string{
			discoveryv1.LabelServiceName: fmt.Sprintf("b-%d", i),
			discoveryv1.LabelManagedBy:   "bench.svcproxy.io", // not the controller's
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
	}
	for j := range benchEndpointsPerService {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{benchEndpoint(i, j, gen).String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ref(true)},
			NodeName:   benchEndpointNode(i, j, gen),
		})
	}
	return s
}

// benchServes says whether a answers for Service i at generation gen.
func benchServes(i, gen int) func(netip.Addr) bool {
	first, last := benchEndpoint(i, 0, gen), benchEndpoint(i, benchEndpointsPerService-1, gen)
	return func(a netip.Addr) bool { return a.Compare(first) >= 0 && a.Compare(last) <= 0 }
}

// benchClient writes objects as fast as the apiserver takes them: no client-side
// rate limit, and protobuf, which the apiserver decodes and etcd stores without
// a JSON round trip (the apiserver stores protobuf; JSON requests are converted).
func (c *cluster) benchClient() (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(c.rest)
	cfg.QPS, cfg.Burst = 5000, 5000
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return kubernetes.NewForConfig(cfg)
}

// benchWriters is how many objects are written at once. The apiserver spends
// most of a write waiting (admission, etcd round trip), so more writers than
// cores keep it busy; its max-requests-inflight (400) is far away.
const benchWriters = 64

// createBenchObjects creates Services and slices from..to-1 of objs with workers
// in parallel; a LoadBalancer's ingress IP is its status's, written after it.
func createBenchObjects(ctx context.Context, cl kubernetes.Interface, objs benchObjects, from, to int) error {
	_, err := cl.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace: %w", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	next := make(chan int)
	for range benchWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := createBenchService(ctx, cl, objs, i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("object %d: %w", i, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := from; i < to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return firstErr
}

// createBenchService creates Service i of objs (its status, if it has one) and
// its slices; what exists already is left as it is.
func createBenchService(ctx context.Context, cl kubernetes.Interface, objs benchObjects, i int) error {
	svc := objs.service(i)
	created, err := cl.CoreV1().Services(benchNS).Create(ctx, svc, metav1.CreateOptions{})
	if err == nil && len(svc.Status.LoadBalancer.Ingress) > 0 {
		created.Status = svc.Status
		_, err = cl.CoreV1().Services(benchNS).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, s := range objs.slices(i) {
		if _, err := cl.DiscoveryV1().EndpointSlices(benchNS).Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// registerBenchNode creates the Node the compared proxies run as: both wait for
// their Node at start.
func (c *cluster) registerBenchNode(ctx context.Context) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: benchNodeName, Labels: map[string]string{"kubernetes.io/hostname": benchNodeName}}}
	created, err := c.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		Reason: "Bench", LastHeartbeatTime: now, LastTransitionTime: now}}
	created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: benchNodeIP}, {Type: corev1.NodeHostName, Address: benchNodeName}}
	_, err = c.client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}
