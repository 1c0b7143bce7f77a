//go:build e2e

package e2e

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// withClusterMetadata gives Service svc and its slices, written straight into
// etcd, the metadata a cluster's objects carry and both proxies decode: the
// Service as kubectl apply leaves it (its last-applied annotation, an app label,
// the field manager's entry), each slice as the EndpointSlice controller writes
// it (its labels, the trigger-time annotation, the Service as owner, the
// controller's field manager entry, a Pod reference per endpoint). Without
// them the objects were a third of the bytes a cluster's are, and decoding
// them cost both proxies less than it does on a cluster. The Services keep no
// selector and the slices their own managed-by label: kcm's controllers must
// leave them alone.
func withClusterMetadata(svc *corev1.Service, slices []*discoveryv1.EndpointSlice, now metav1.Time) {
	app := svc.Name
	svc.Labels = map[string]string{"app": app, "app.kubernetes.io/part-of": "bench"}
	svc.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": fmt.Sprintf(
		`{"apiVersion":"v1","kind":"Service","metadata":{"annotations":{},"labels":{"app":%q},"name":%q,"namespace":%q},"spec":{"ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":8080}],"selector":{"app":%q}}}`,
		app, svc.Name, svc.Namespace, app)}
	svc.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: "v1", Time: &now, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(
			`{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},"f:labels":{".":{},"f:app":{},"f:app.kubernetes.io/part-of":{}}},"f:spec":{"f:internalTrafficPolicy":{},"f:ports":{".":{},"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:name":{},"f:port":{},"f:protocol":{},"f:targetPort":{}}},"f:selector":{},"f:sessionAffinity":{},"f:type":{}}}`)}}
	for _, s := range slices {
		s.GenerateName = svc.Name + "-"
		s.Labels["app"] = app
		s.Labels["app.kubernetes.io/part-of"] = "bench"
		s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: now.UTC().Format("2006-01-02T15:04:05Z")}
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
			Controller: ref(true), BlockOwnerDeletion: ref(true)}}
		s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "discovery.k8s.io/v1", Time: &now, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(
				`{"f:addressType":{},"f:endpoints":{},"f:metadata":{"f:annotations":{".":{},"f:endpoints.kubernetes.io/last-change-trigger-time":{}},"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:app.kubernetes.io/part-of":{},"f:endpointslice.kubernetes.io/managed-by":{},"f:kubernetes.io/service-name":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"` + string(svc.UID) + `\"}":{}}},"f:ports":{}}`)}}
		for j := range s.Endpoints {
			pod := "pod-" + s.Endpoints[j].Addresses[0]
			s.Endpoints[j].TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: s.Namespace, Name: pod,
				UID: types.UID(fmt.Sprintf("7e57%04x-0000-4000-8000-%012x", j, addrNum(s.Endpoints[j].Addresses[0])))}
			s.Endpoints[j].Conditions.Serving, s.Endpoints[j].Conditions.Terminating = ref(true), ref(false)
		}
	}
}

// addrNum is an IPv4 address as a number, for a Pod UID per address.
func addrNum(a string) uint64 {
	var b [4]uint64
	_, _ = fmt.Sscanf(a, "%d.%d.%d.%d", &b[0], &b[1], &b[2], &b[3])
	return b[0]<<24 | b[1]<<16 | b[2]<<8 | b[3]
}
