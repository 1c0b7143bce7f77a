package main

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/internal/poll"
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

// nodeWait is how long kube-proxy waits at start for its Node to show up (its
// NodeManager's wait for the node's IPs) before going on without it.
const nodeWait = 30 * time.Second

// watchNodeEligibility watches this node's Node object and reports nodeEligible of
// its latest version. Like kube-proxy's NodeManager, it returns once the informer
// has synced and the Node exists, or wait has passed.
func watchNodeEligibility(ctx context.Context, client kubernetes.Interface, name string, wait time.Duration) func() bool {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 15*time.Minute,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	informer := factory.Core().V1().Nodes()
	lister := informer.Lister()
	factory.Start(ctx.Done())
	eligible := func() bool {
		n, err := lister.Get(name)
		return err == nil && nodeEligible(n)
	}
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if cache.WaitForCacheSync(waitCtx.Done(), informer.Informer().HasSynced) {
		_ = poll.Until(waitCtx, wait, 100*time.Millisecond, func() (bool, string) {
			_, err := lister.Get(name)
			return err == nil, "no Node " + name
		})
	}
	if _, err := lister.Get(name); err != nil {
		klog.InfoS("This node's Node object is not known yet; /healthz says the node is not eligible until it is", "node", name)
	}
	return eligible
}
