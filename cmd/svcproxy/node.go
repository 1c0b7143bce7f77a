package main

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

// toBeDeletedTaint is the cluster autoscaler's taint on a node it is removing.
const toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// nodeEligible is kube-proxy's rule for /healthz's nodeEligible: load balancers
// should stop sending traffic to a node that is unknown, being deleted, or about
// to be removed by the cluster autoscaler.
func nodeEligible(n *corev1.Node) bool {
	if n == nil || n.DeletionTimestamp != nil {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == toBeDeletedTaint {
			return false
		}
	}
	return true
}

// watchNodeEligibility watches this node's Node object and reports nodeEligible of
// its latest version (false until it is seen).
func watchNodeEligibility(ctx context.Context, client kubernetes.Interface, name string) func() bool {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 15*time.Minute,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	lister := factory.Core().V1().Nodes().Lister()
	factory.Start(ctx.Done())
	return func() bool {
		n, err := lister.Get(name)
		return err == nil && nodeEligible(n)
	}
}
