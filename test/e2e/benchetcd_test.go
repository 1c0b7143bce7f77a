//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/svcproxy/svcproxy/internal/netns"
)

// Writing through the apiserver costs it a ClusterIP allocation (an IPAddress
// object written through its own loopback client), admission and validation per
// Service: on this shared 2-core machine, with other developers' builds beside,
// that fell from ~44 objects/s to 4/s and the 30k side by side could not be
// written in an hour. E2E_BENCH_WRITE=etcd (hack/bench.sh: BENCH_WRITE=etcd)
// writes the same objects straight into the harness's own etcd, encoded as the
// apiserver stores them (protobuf in the k8s envelope), with the IPAddress that
// records each ClusterIP, and waits until the apiserver's watch cache serves
// them. What the proxies read (a list from the watch cache, then a watch) is the
// same either way; the apiserver's write path is not what is measured.

// benchEtcdTxnOps is how many puts go in one etcd transaction (etcd's
// --max-txn-ops default is 128).
const benchEtcdTxnOps = 120

// createBenchObjectsInEtcd writes Services from..to-1 of objs, their
// EndpointSlices and their ClusterIPs' IPAddresses into etcd, then waits for the
// apiserver to serve the last of them from its cache.
func (c *cluster) createBenchObjectsInEtcd(ctx context.Context, cl kubernetes.Interface, objs benchObjects, from, to int) error {
	_, err := cl.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace: %w", err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: netns.DialFunc(c.cp().netns, 5*time.Second)}, Timeout: time.Minute}
	codec := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	var ops []map[string]any
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		body, err := json.Marshal(map[string]any{"success": ops})
		if err != nil {
			return err
		}
		ops = ops[:0]
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:2379/v3/kv/txn", bytes.NewReader(body))
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("etcd txn: %w", err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(out), `"succeeded":true`) {
			return fmt.Errorf("etcd txn: %s: %s", resp.Status, out)
		}
		return nil
	}
	put := func(key string, obj runtime.Object) error {
		var b bytes.Buffer
		if err := codec.Encode(obj, &b); err != nil {
			return fmt.Errorf("encode %s: %w", key, err)
		}
		ops = append(ops, map[string]any{"requestPut": map[string]string{
			"key": base64.StdEncoding.EncodeToString([]byte(key)), "value": base64.StdEncoding.EncodeToString(b.Bytes())}})
		if len(ops) >= benchEtcdTxnOps {
			return flush()
		}
		return nil
	}
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	for i := from; i < to; i++ {
		svc, slices, ip := storedBenchObjects(objs, i, now)
		if err := put("/registry/services/specs/"+benchNS+"/"+svc.Name, svc); err != nil {
			return err
		}
		for _, slice := range slices {
			if err := put("/registry/endpointslices/"+benchNS+"/"+slice.Name, slice); err != nil {
				return err
			}
		}
		if err := put("/registry/ipaddresses/"+ip.Name, ip); err != nil {
			return err
		}
	}
	if err := flush(); err != nil {
		return err
	}
	last := fmt.Sprintf("b-%d", to-1)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, errS := cl.CoreV1().Services(benchNS).Get(ctx, last, metav1.GetOptions{ResourceVersion: "0"})
		_, errE := cl.DiscoveryV1().EndpointSlices(benchNS).Get(ctx, last, metav1.GetOptions{ResourceVersion: "0"})
		if errS == nil && errE == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("apiserver does not serve what was written to etcd: %v, %v", errS, errE)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// storedBenchObjects are Service i of objs and its slices as the apiserver would
// have stored them (defaults, uid, creation time, a cluster's metadata:
// withClusterMetadata; no resourceVersion, which etcd's revision gives), and the
// IPAddress of the Service's ClusterIP.
func storedBenchObjects(objs benchObjects, i int, now metav1.Time) (*corev1.Service, []*discoveryv1.EndpointSlice, *networkingv1.IPAddress) {
	svc := objs.service(i)
	svc.TypeMeta = metav1.TypeMeta{Kind: "Service", APIVersion: "v1"}
	svc.UID, svc.CreationTimestamp = types.UID(fmt.Sprintf("5b0c0000-0000-4000-8000-%012d", i)), now
	if svc.Spec.Type == "" {
		svc.Spec.Type = corev1.ServiceTypeClusterIP
	}
	svc.Spec.SessionAffinity = corev1.ServiceAffinityNone
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	svc.Spec.IPFamilyPolicy = ref(corev1.IPFamilyPolicySingleStack)
	svc.Spec.InternalTrafficPolicy = ref(corev1.ServiceInternalTrafficPolicyCluster)
	// The shared shape's NodePort and LoadBalancer Services, defaulted.
	if svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		svc.Spec.AllocateLoadBalancerNodePorts = ref(true)
	}

	slices := objs.slices(i)
	for k, slice := range slices {
		slice.TypeMeta = metav1.TypeMeta{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1"}
		slice.UID, slice.CreationTimestamp, slice.Generation = types.UID(fmt.Sprintf("5b0c%04x-0000-4000-8000-%012d", k+1, i)), now, 1
	}
	withClusterMetadata(svc, slices, now)

	ip := &networkingv1.IPAddress{
		TypeMeta: metav1.TypeMeta{Kind: "IPAddress", APIVersion: "networking.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: svc.Spec.ClusterIP, UID: types.UID(fmt.Sprintf("5b0c0002-0000-4000-8000-%012d", i)), CreationTimestamp: now,
			Labels: map[string]string{networkingv1.LabelIPAddressFamily: string(corev1.IPv4Protocol), networkingv1.LabelManagedBy: "ipallocator.k8s.io"}},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: benchNS, Name: svc.Name}},
	}
	return svc, slices, ip
}

// restartAPIServer stops kube-apiserver and starts it again on the same etcd,
// and waits until it is ready. Written behind its back, the objects set off
// its ClusterIP repair loop, whose informer of IPAddresses lacked ~2k of the
// 30k that etcd and the watch cache had (also with the IPAddresses written
// and served before their Services: tried): it "repaired" them, retrying each, at 10/s in all, for many
// minutes, 1-3 CPU seconds more of the control plane's during a proxy's cold
// sync. Started on the objects, it lists them all before repairing anything,
// as an apiserver of a cluster whose objects came through it would have.
func (c *cluster) restartAPIServer(ctx context.Context) error {
	start := time.Now()
	c.apiserver.kill() // a graceful stop waits out its watches: 40 s
	<-c.apiserver.Done()
	api, err := c.restartControl(c.apiserver)
	if err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	c.apiserver = api
	if err := c.waitAPIReady(ctx); err != nil {
		return err
	}
	c.logf("bench: kube-apiserver restarted on the objects in %v", time.Since(start).Round(time.Millisecond))
	return nil
}
