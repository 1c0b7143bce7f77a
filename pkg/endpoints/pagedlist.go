package endpoints

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// listPageSize is how many objects one List request asks for: a page of 500
// EndpointSlices decodes to a few MiB, where a whole list of 30k is ~150 MiB.
const listPageSize = 500

// pagedLister lists page by page and delivers each page's objects to deliver as
// soon as it is decoded (or as it streams: streamList), returning to the
// reflector only their keys (keyList), so that a list of any size never holds
// more than one page of objects.
//
// Objects delivered by a List that then fails stay delivered: they were true
// at the list's resource version, and the relist that follows ends with
// feed.Replace, which deletes whatever is gone by then.
type pagedLister struct {
	lw       cache.ListerWatcherWithContext
	deliver  func(obj any) error
	pageSize int64
	listed   atomic.Bool // a List has completed: see WatchWithContext
	// streamFirst lets the first list be a watch-list too, as kube-proxy's
	// informers do (Clients.StreamFirstList).
	streamFirst bool
}

// errListFirst is what a watch-list request gets before the first List: the
// reflector then falls back to a List (at resource version "0", served by the
// watch cache), and uses watch-list for the relists after.
var errListFirst = errors.New("svcproxy lists before it streams lists: a List from the watch cache costs the API server a fraction of a watch-list's CPU")

var _ ListerWatcher = &pagedLister{}

func (p *pagedLister) List(opts metav1.ListOptions) (runtime.Object, error) {
	return p.ListWithContext(context.Background(), opts)
}

func (p *pagedLister) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return p.WatchWithContext(context.Background(), opts)
}

// WatchWithContext refuses a watch-list request (SendInitialEvents) until a
// List has completed: the first list is a List. A watch-list sends each object
// as an event of its own, which kube-apiserver 1.37 encodes, gzips and flushes
// one by one: during a cold start at 30k Services the control plane used
// 2.0-4.2 CPU s with watch-list and ~1.0 with a List of the same objects from
// the watch cache, on the cores a node shares with svcproxy's own cold start
// (make bench). The relists after an outage keep watch-list (see
// IsWatchListSemanticsUnSupported). (A client that cannot stream lists, the
// fake Clientset, never asks for one.)
func (p *pagedLister) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if !p.streamFirst && !p.listed.Load() && opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		return nil, errListFirst
	}
	return p.lw.WatchWithContext(ctx, opts)
}

// IsWatchListSemanticsUnSupported passes on what the client says: where the
// API server can stream lists (watch-list), the reflector does, and the feed's
// Transformer delivers the stream object by object; the paged List is for the
// others. A relist served by List (RV "") is a quorum read whose resource
// version the watch cache may not have reached, and the watch that follows
// then fails and relists again: seen after an API server outage, when only
// watch-list kept the Services in step.
func (p *pagedLister) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(p.lw)
}

// ListWithContext pages through the list opts ask for (all pages at the first
// page's resource version, as continue tokens guarantee) and returns the keys.
func (p *pagedLister) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	out := &keyList{}
	opts.Limit, opts.Continue = p.pageSize, ""
	for {
		page, err := p.lw.ListWithContext(ctx, opts)
		if err != nil {
			return nil, err
		}
		lm, err := meta.ListAccessor(page)
		if err != nil {
			return nil, fmt.Errorf("list page: %w", err)
		}
		if keys, streamed := page.(*keyList); streamed {
			out.Items = append(out.Items, keys.Items...) // delivered as it streamed
		} else if err := meta.EachListItem(page, func(obj runtime.Object) error { return out.add(obj, p.deliver) }); err != nil {
			return nil, err
		}
		out.ResourceVersion = lm.GetResourceVersion()
		if lm.GetContinue() == "" {
			p.listed.Store(true)
			return out, nil
		}
		// A continue token carries the resource version; the request must not.
		opts.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = lm.GetContinue(), "", ""
	}
}
