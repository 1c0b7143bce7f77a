// Package node is what svcproxy knows about the node it runs on: its Node
// object, watched (kube-proxy's eligibility rule for /healthz, the zone for
// topology hints, the addresses for NodePort 'primary'), and the IP families it
// serves (the primary one, and the other when the kernel and nf_tables take it).
package node

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/internal/poll"
)

// toBeDeletedTaint is the cluster autoscaler's taint on a node it is removing.
const toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// eligible is kube-proxy's rule for /healthz's nodeEligible: load balancers
// should stop sending traffic to a node that is unknown, being deleted, or about
// to be removed by the cluster autoscaler.
func eligible(n *corev1.Node) bool {
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

// Wait is how long kube-proxy waits at start for its Node to show up (its
// NodeManager's wait for the node's IPs) before going on without it.
const Wait = 30 * time.Second

// Watcher is this node's Node object as an informer sees it.
type Watcher struct {
	get func() (*corev1.Node, bool)
	// changed and zoneChanged are signalled (without blocking) when the Node is
	// added or updated: one channel per follower, so that neither misses a change.
	changed, zoneChanged chan struct{}
}

// Changed is signalled whenever the Node may have changed; read Addresses then.
func (w Watcher) Changed() <-chan struct{} { return w.changed }

// Eligible is kube-proxy's rule (eligible) on the Node's latest version (false while unknown).
func (w Watcher) Eligible() bool {
	n, ok := w.get()
	return ok && eligible(n)
}

// Zone is the Node's topology.kubernetes.io/zone label now ("" while unknown or
// unlabelled): EndpointSlice zone hints name it.
func (w Watcher) Zone() string {
	if n, ok := w.get(); ok {
		return n.Labels[corev1.LabelTopologyZone]
	}
	return ""
}

// FollowZone gives set the Node's zone after every change of the Node, until ctx
// ends (the caller sets the first one before the first sync); set is expected
// to ignore an unchanged zone (proxy.SetZone does). A zone
// change is rare (a relabelled node) but re-renders every Service: kube-proxy
// follows it the same way (NodeTopologyConfig), without a restart.
func (w Watcher) FollowZone(ctx context.Context, set func(zone string)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.zoneChanged:
			set(w.Zone())
		}
	}
}

// Addresses are the Node's status addresses now (nil while unknown), from which
// the primary IPs of --nodeport-addresses=primary come.
func (w Watcher) Addresses() []corev1.NodeAddress {
	if n, ok := w.get(); ok {
		return n.Status.Addresses
	}
	return nil
}

// Watch watches the Node called name. Like kube-proxy's NodeManager, it returns
// once the informer has synced and the Node exists, or wait has passed.
// watchList is what client-go's reflector asks whether the client can stream
// lists (nil: it can; a fake Clientset says it cannot).
func Watch(ctx context.Context, nodes typedcorev1.NodesGetter, watchList any, name string, wait time.Duration) Watcher {
	informer := nodeInformer(nodes, watchList, name)
	changed, zoneChanged := make(chan struct{}, 1), make(chan struct{}, 1)
	signal := func() {
		for _, c := range []chan struct{}{changed, zoneChanged} {
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { signal() },
		UpdateFunc: func(any, any) { signal() },
	})
	go informer.Run(ctx.Done())
	get := func() (*corev1.Node, bool) {
		obj, exists, err := informer.GetStore().GetByKey(name)
		n, _ := obj.(*corev1.Node)
		return n, err == nil && exists && n != nil
	}
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if cache.WaitForCacheSync(waitCtx.Done(), informer.HasSynced) {
		_ = poll.Until(waitCtx, wait, 100*time.Millisecond, func() (bool, string) {
			_, ok := get()
			return ok, "no Node " + name
		})
	}
	if _, ok := get(); !ok {
		klog.InfoS("This node's Node object is not known yet; /healthz says the node is not eligible until it is, and NodePort address 'primary' falls back to --bind-address", "node", name)
	}
	return Watcher{get: get, changed: changed, zoneChanged: zoneChanged}
}

// nodeInformer is the informer client-go's factory builds for core/v1 Nodes
// (namespace index, 15 min resync), restricted to the Node called name: the
// same List and Watch calls as before, and as RBAC allows.
func nodeInformer(nodes typedcorev1.NodesGetter, watchList any, name string) cache.SharedIndexInformer {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, lo metav1.ListOptions) (runtime.Object, error) {
			lo.FieldSelector = selector
			return nodes.Nodes().List(ctx, lo)
		},
		WatchFuncWithContext: func(ctx context.Context, lo metav1.ListOptions) (watch.Interface, error) {
			lo.FieldSelector = selector
			return nodes.Nodes().Watch(ctx, lo)
		},
	}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, watchList), &corev1.Node{},
		cache.SharedIndexInformerOptions{
			ResyncPeriod: 15 * time.Minute,
			Indexers:     cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		})
}
