package endpoints

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// keyed is a Service named by its "ns/name" key.
func keyed(key string) *v1.Service {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	return makeService(ns, name, "10.96.0.1", nil)
}

// key is what pagedLister hands the reflector for an object it delivered.
func key(k string) *keyStub {
	ns, name, _ := cache.SplitMetaNamespaceKey(k)
	return &keyStub{cache.NewObjectName(ns, name)}
}

// stub is what the watch-list stream gathers for an object it delivered.
func stub(key string) *metav1.PartialObjectMetadata {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// recorder collects what a feed tells one tracker, and holds what it was
// given and not told gone since, as a tracker does.
type recorder struct {
	upserted, deleted []string
	held              map[string]bool
}

func (r *recorder) attach(f *feed) {
	r.held = map[string]bool{}
	f.upserts = append(f.upserts, func(obj any) {
		k, _ := cache.MetaNamespaceKeyFunc(obj)
		r.upserted = append(r.upserted, k)
		r.held[k] = true
	})
	f.deletes = append(f.deletes, func(obj any) {
		k, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		r.deleted = append(r.deleted, k)
		delete(r.held, k)
	})
	f.holders = append(f.holders, func(yield func(cache.ObjectName) bool) {
		for k := range r.held {
			ns, name, _ := cache.SplitMetaNamespaceKey(k)
			if !yield(cache.NewObjectName(ns, name)) {
				return
			}
		}
	})
}

// TestFeedReplace: a relist deletes, from every tracker, what was delivered
// before (by a watch event, or by a list that failed half way) and is not
// listed now; stubs are not delivered again, whole objects are.
func TestFeedReplace(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		before                 []string // delivered before the relist
		deletedBefore          []string // then deleted by a watch event
		replace                []any
		wantUpserted, wantGone []string // by Replace
	}{
		{"first list", nil, nil, []any{stub("ns/a"), stub("ns/b")}, nil, nil},
		{"one gone", []string{"ns/a", "ns/b"}, nil, []any{stub("ns/a")}, nil, []string{"ns/b"}},
		{"all gone", []string{"ns/a", "ns/b"}, nil, nil, nil, []string{"ns/a", "ns/b"}},
		{"deleted by watch, not again", []string{"ns/a", "ns/b"}, []string{"ns/b"}, []any{stub("ns/a")}, nil, nil},
		{"whole objects delivered", []string{"ns/a"}, nil, []any{keyed("ns/c")}, []string{"ns/c"}, []string{"ns/a"}},
		{"listed keys", []string{"ns/a", "ns/b", "c"}, nil, []any{key("ns/a"), key("c"), key("ns/d")}, nil, []string{"ns/b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFeed(KindService)
			var r1, r2 recorder
			r1.attach(f)
			r2.attach(f)
			for _, k := range tc.before {
				if err := f.Add(keyed(k)); err != nil {
					t.Fatal(err)
				}
			}
			for _, k := range tc.deletedBefore {
				if err := f.Delete(keyed(k)); err != nil {
					t.Fatal(err)
				}
			}
			if f.hasSynced() {
				t.Fatal("synced before any relist")
			}
			r1.upserted, r1.deleted, r2.upserted, r2.deleted = nil, nil, nil, nil
			if err := f.Replace(tc.replace, "9"); err != nil {
				t.Fatal(err)
			}
			if !f.hasSynced() {
				t.Error("not synced after the relist")
			}
			for i, r := range []*recorder{&r1, &r2} {
				slices.Sort(r.deleted)
				if !slices.Equal(r.upserted, tc.wantUpserted) || !slices.Equal(r.deleted, tc.wantGone) {
					t.Errorf("tracker %d: upserted %v, deleted %v; want %v, %v", i, r.upserted, r.deleted, tc.wantUpserted, tc.wantGone)
				}
			}
			listed := map[string]bool{}
			for _, obj := range tc.replace {
				k, _ := cache.MetaNamespaceKeyFunc(obj)
				if s, ok := obj.(*keyStub); ok {
					k = s.String()
				}
				listed[k] = true
			}
			for i, r := range []*recorder{&r1, &r2} {
				for k := range r.held {
					if !listed[k] {
						t.Errorf("tracker %d still holds %s, not listed", i, k)
					}
				}
			}
		})
	}
}

// TestFeedStreamed: a watch-list stream, gathered by the reflector in a store
// of its own with the feed's Transformer, reaches the trackers object by
// object while that store keeps key stubs; its Replace deletes what is gone.
func TestFeedStreamed(t *testing.T) {
	f := newFeed(KindService)
	var r recorder
	r.attach(f)
	if err := f.Add(keyed("ns/gone")); err != nil {
		t.Fatal(err)
	}
	tmp := cache.NewStore(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.WithTransformer(f.Transformer()))
	for _, k := range []string{"ns/a", "ns/b"} {
		if err := tmp.Add(keyed(k)); err != nil {
			t.Fatal(err)
		}
		if got := r.upserted[len(r.upserted)-1]; got != k {
			t.Fatalf("%s not delivered as it arrived (last: %s)", k, got)
		}
	}
	for _, obj := range tmp.List() {
		if _, stub := obj.(*metav1.PartialObjectMetadata); !stub {
			t.Errorf("the stream's store keeps a %T, want key stubs", obj)
		}
	}
	if err := f.Replace(tmp.List(), "9"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.upserted, []string{"ns/gone", "ns/a", "ns/b"}) || !slices.Equal(r.deleted, []string{"ns/gone"}) {
		t.Errorf("upserted %v, deleted %v; want gone, a, b and gone", r.upserted, r.deleted)
	}
}
