package endpoints

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// feed is what a reflector writes into instead of an informer's cache: it hands
// every object straight to the trackers, which keep the plain values they extract
// and compute deltas from their own state. An informer would keep a second full
// copy of every Service and EndpointSlice (~160 MiB at 30k, trimmed). The object
// is garbage once handed on; what svcproxy never reads was dropped from its
// bytes before it was decoded (trimmer). The feed keeps not even the objects'
// keys: at a relist it asks each tracker which objects it holds (holders) and
// deletes those no longer listed (a set of "ns/name" of its own was 12 MB at
// 100k Services, beside the same names in the trackers).
//
// It is the reflector's cache.ReflectorStore. Add, Update and Delete carry watch
// events; Replace ends a relist, whose objects were already delivered as they
// arrived and replaced by key-only stubs: by Transformer for a watch-list stream
// (what the API server speaks), by pagedLister page by page for a plain list.
type feed struct {
	kind string // KindService or KindEndpointSlice

	mu sync.Mutex
	// synced: the first relist is delivered.
	synced bool
	// trackers' handlers; set before the reflector starts (RegisterSynced).
	// An upsert keeps nothing of obj after it returns (decodeProtobufList
	// reuses it).
	upserts []func(obj any)
	deletes []func(obj any)
	// holders yield the keys of the objects each tracker keeps. A consumer
	// that keeps nothing (RegisterFuncs) has none: a relist has nothing to
	// take from it.
	holders []func(yield func(cache.ObjectName) bool)
}

var _ cache.TransformingStore = &feed{}

func newFeed(kind string) *feed { return &feed{kind: kind} }

// hasSynced reports whether the first relist has reached the trackers.
func (f *feed) hasSynced() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.synced
}

// upsert gives obj to every tracker.
func (f *feed) upsert(obj any) error {
	if _, err := cache.MetaNamespaceKeyFunc(obj); err != nil {
		return fmt.Errorf("%s without a key: %w", f.kind, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, up := range f.upserts {
		up(obj)
	}
	return nil
}

func (f *feed) Add(obj any) error    { return f.upsert(obj) }
func (f *feed) Update(obj any) error { return f.upsert(obj) }

// Delete tells every tracker obj is gone.
func (f *feed) Delete(obj any) error {
	if _, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err != nil {
		return fmt.Errorf("deleted %s without a key: %w", f.kind, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleteLocked(obj)
	return nil
}

func (f *feed) deleteLocked(obj any) {
	for _, del := range f.deletes {
		del(obj)
	}
}

// Replace ends a relist: items are what exists now. Keys (keyStub from
// pagedLister, PartialObjectMetadata from a watch-list stream, whose objects
// were delivered already) only count as present; whole objects are delivered.
// Every object a tracker holds and that is not in items is deleted from the
// trackers, by key, as a tombstone.
func (f *feed) Replace(items []any, _ string) error {
	now := make(map[cache.ObjectName]struct{}, len(items))
	for _, obj := range items {
		if k, ok := obj.(*keyStub); ok {
			now[k.ObjectName] = struct{}{}
			continue
		}
		if _, stub := obj.(*metav1.PartialObjectMetadata); !stub {
			if err := f.upsert(obj); err != nil {
				return err
			}
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return fmt.Errorf("listed %s without a key: %w", f.kind, err)
		}
		now[cache.NewObjectName(m.GetNamespace(), m.GetName())] = struct{}{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Gathered before any delete: a holder yields under its tracker's lock,
	// which the delete takes.
	var gone []cache.ObjectName
	for _, held := range f.holders {
		for k := range held {
			if _, ok := now[k]; !ok {
				gone = append(gone, k)
			}
		}
	}
	// Both families' trackers hold most keys: each goes once.
	slices.SortFunc(gone, func(a, b cache.ObjectName) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	for _, k := range slices.Compact(gone) {
		f.deleteLocked(cache.DeletedFinalStateUnknown{Key: k.String()})
	}
	f.synced = true
	return nil
}

// Transformer makes the reflector's watch-list stream (the initial state sent
// as ADDED events, which the reflector gathers in a store of its own before
// calling Replace) deliver each object as it arrives and gather only key stubs.
func (f *feed) Transformer() cache.TransformFunc { return f.streamed }

func (f *feed) streamed(obj any) (any, error) {
	if s, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return s, nil // transforms must be idempotent
	}
	if err := f.upsert(obj); err != nil {
		return nil, err
	}
	return stubOf(obj)
}

// stubOf is the key stub of obj: namespace and name.
func stubOf(obj any) (*metav1.PartialObjectMetadata, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("stub: %w", err)
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: m.GetNamespace(), Name: m.GetName()}}, nil
}

// Resync has nothing to re-deliver: there is no cache, and the trackers
// compare against their own state, so a resync would change nothing anyway.
func (f *feed) Resync() error { return nil }
