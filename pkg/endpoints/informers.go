package endpoints

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// Register wires the factory's core/v1 Service and discovery/v1 EndpointSlice
// informers to t. Call it before factory.Start so the initial lists are
// delivered. Callers may also filter out Services labelled
// LabelServiceProxyName with the factory's list options; the tracker checks
// again anyway.
func Register(factory informers.SharedInformerFactory, t *Tracker) error {
	_, err := RegisterSynced(factory, t)
	return err
}

// RegisterSynced is Register, also returning a function that reports whether
// both handlers have received their informer's initial list. A sync loop
// should wait for it before its first Take; rendering earlier would remove
// rules for Services that simply have not been listed yet.
func RegisterSynced(factory informers.SharedInformerFactory, t *Tracker) (hasSynced func() bool, err error) {
	svcReg, err := factory.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if svc, ok := obj.(*v1.Service); ok {
				t.OnServiceAdd(svc)
			} else {
				t.reportUnexpected(KindService, obj)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			svc, ok := newObj.(*v1.Service)
			if !ok {
				t.reportUnexpected(KindService, newObj)
				return
			}
			old, _ := oldObj.(*v1.Service)
			t.OnServiceUpdate(old, svc)
		},
		DeleteFunc: t.OnServiceDeleteObj,
	})
	if err != nil {
		return nil, fmt.Errorf("register Service event handler: %w", err)
	}
	sliceReg, err := factory.Discovery().V1().EndpointSlices().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
				t.OnEndpointSliceAdd(s)
			} else {
				t.reportUnexpected(KindEndpointSlice, obj)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			s, ok := newObj.(*discoveryv1.EndpointSlice)
			if !ok {
				t.reportUnexpected(KindEndpointSlice, newObj)
				return
			}
			old, _ := oldObj.(*discoveryv1.EndpointSlice)
			t.OnEndpointSliceUpdate(old, s)
		},
		DeleteFunc: t.OnEndpointSliceDeleteObj,
	})
	if err != nil {
		return nil, fmt.Errorf("register EndpointSlice event handler: %w", err)
	}
	return func() bool { return svcReg.HasSynced() && sliceReg.HasSynced() }, nil
}
