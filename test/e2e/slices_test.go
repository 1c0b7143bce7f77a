//go:build e2e

package e2e

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// managedBy marks the EndpointSlices the tests write themselves (for
// selectorless Services), so that the endpointslice controller leaves them
// alone and the test controls every update.
const managedBy = "e2e.svcproxy.dev"

// manualSlice is an EndpointSlice of Service svc with one unnamed TCP port.
func manualSlice(name, svc string, port int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: svc,
				discoveryv1.LabelManagedBy:   managedBy,
			},
		},
		AddressType: primaryAddressType(),
		Ports:       []discoveryv1.EndpointPort{{Name: ref(""), Port: ref(port), Protocol: ref(tcp)}},
		Endpoints:   eps,
	}
}

// readyEndpoint is a ready endpoint at addr on node.
func readyEndpoint(addr, node string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{addr},
		Conditions: discoveryv1.EndpointConditions{Ready: ref(true), Serving: ref(true), Terminating: ref(false)},
		NodeName:   ref(node),
	}
}

// podEndpoint is a ready endpoint for a running Pod.
func podEndpoint(p corev1.Pod) discoveryv1.Endpoint {
	e := readyEndpoint(p.Status.PodIP, p.Spec.NodeName)
	e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: p.Name, UID: p.UID}
	return e
}

// firstAnswer opens a new connection to ip:port every ~2 ms until want
// answers, and returns how long that took from since.
func firstAnswer(cl *podClient, ip string, port int32, want string, since time.Time, timeout time.Duration) (time.Duration, error) {
	deadline := since.Add(timeout)
	for {
		got, err := cl.hit(ip, port)
		if got == want {
			return time.Since(since), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s not served within %v (last answer %q, %v)", want, timeout, got, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
