package endpoints

import "k8s.io/client-go/tools/cache"

// The held* functions yield the keys of the objects a tracker keeps, under its
// lock: the feed's relist deletes those no longer listed (feed.Replace). An
// object a tracker did not keep (another family's, a headless Service, one
// refused as invalid) needs no delete: deleting it would change nothing.

func (t *Tracker) heldServices(yield func(cache.ObjectName) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.services {
		if !yield(cache.NewObjectName(k.Namespace, k.Name)) {
			return
		}
	}
}

func (t *Tracker) heldSlices(yield func(cache.ObjectName) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.sliceOwner {
		if !yield(cache.NewObjectName(k.Namespace, k.Name)) {
			return
		}
	}
}

func (t *ServiceCIDRTracker) held(yield func(cache.ObjectName) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name := range t.byName {
		if !yield(cache.NewObjectName("", name)) {
			return
		}
	}
}
