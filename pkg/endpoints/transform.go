package endpoints

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The informers' caches hold every Service and EndpointSlice of the cluster for as
// long as svcproxy runs. What the API server sends carries much that a proxy never
// reads (managedFields alone is often larger than the rest of the object), so each
// object is cut down, as it arrives, to a copy of the fields svcproxy and kube-proxy's
// policy read. The copy is a whitelist: a field added to the API later is dropped
// until someone adds it here, rather than kept by accident.

// serviceLabels are the Service labels svcproxy reads: which proxy owns it, and
// headless (both also filtered by the API server's label selector).
var serviceLabels = []string{LabelServiceProxyName, v1.IsHeadlessService}

// sliceLabels are the EndpointSlice labels svcproxy reads: its Service.
var sliceLabels = []string{discoveryv1.LabelServiceName}

// sliceAnnotations are the EndpointSlice annotations svcproxy reads: when the change
// that produced this version happened, for network programming latency.
var sliceAnnotations = []string{v1.EndpointsLastChangeTriggerTime}

// TrimObject is the informers' cache.TransformFunc: Services and EndpointSlices are
// replaced by their trimmed copies, anything else (tombstones) passes unchanged. It
// is idempotent, as client-go asks of a transform.
func TrimObject(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1.Service:
		return TrimService(o), nil
	case *discoveryv1.EndpointSlice:
		return TrimEndpointSlice(o), nil
	default:
		return obj, nil
	}
}

// TrimService returns a copy of svc with only what a service proxy reads: identity,
// the ports and addresses it serves on, its traffic policies and affinity, and the
// load balancers' addresses. Slices and pointers not trimmed are shared with svc.
func TrimService(svc *v1.Service) *v1.Service {
	if svc == nil {
		return nil
	}
	s := svc.Spec
	out := &v1.Service{
		TypeMeta:   svc.TypeMeta,
		ObjectMeta: trimMeta(svc.ObjectMeta, serviceLabels, nil),
		Spec: v1.ServiceSpec{
			Type:                          s.Type,
			ClusterIP:                     s.ClusterIP,
			ClusterIPs:                    s.ClusterIPs,
			IPFamilies:                    s.IPFamilies,
			ExternalIPs:                   s.ExternalIPs,
			SessionAffinity:               s.SessionAffinity,
			SessionAffinityConfig:         s.SessionAffinityConfig,
			ExternalTrafficPolicy:         s.ExternalTrafficPolicy,
			InternalTrafficPolicy:         s.InternalTrafficPolicy,
			HealthCheckNodePort:           s.HealthCheckNodePort,
			LoadBalancerSourceRanges:      s.LoadBalancerSourceRanges,
			AllocateLoadBalancerNodePorts: s.AllocateLoadBalancerNodePorts,
			TrafficDistribution:           s.TrafficDistribution,
		},
	}
	if s.Ports != nil {
		out.Spec.Ports = make([]v1.ServicePort, len(s.Ports))
		for i, p := range s.Ports {
			// Not targetPort nor appProtocol: endpoints come from EndpointSlices.
			out.Spec.Ports[i] = v1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, NodePort: p.NodePort}
		}
	}
	if in := svc.Status.LoadBalancer.Ingress; in != nil {
		out.Status.LoadBalancer.Ingress = make([]v1.LoadBalancerIngress, len(in))
		for i, lb := range in {
			out.Status.LoadBalancer.Ingress[i] = v1.LoadBalancerIngress{IP: lb.IP, IPMode: lb.IPMode}
		}
	}
	return out
}

// TrimEndpointSlice returns a copy of s with only what a service proxy reads: its
// Service, address type, ports, and per endpoint the addresses, conditions, node,
// zone and topology hints (not hostname nor targetRef).
func TrimEndpointSlice(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	if s == nil {
		return nil
	}
	out := &discoveryv1.EndpointSlice{
		TypeMeta:    s.TypeMeta,
		ObjectMeta:  trimMeta(s.ObjectMeta, sliceLabels, sliceAnnotations),
		AddressType: s.AddressType,
	}
	if s.Ports != nil {
		out.Ports = make([]discoveryv1.EndpointPort, len(s.Ports))
		for i, p := range s.Ports {
			out.Ports[i] = discoveryv1.EndpointPort{Name: p.Name, Protocol: p.Protocol, Port: p.Port}
		}
	}
	if s.Endpoints != nil {
		out.Endpoints = make([]discoveryv1.Endpoint, len(s.Endpoints))
		for i, ep := range s.Endpoints {
			c := ep.Conditions
			out.Endpoints[i] = discoveryv1.Endpoint{Addresses: ep.Addresses,
				Conditions: discoveryv1.EndpointConditions{Ready: sharedBool(c.Ready), Serving: sharedBool(c.Serving), Terminating: sharedBool(c.Terminating)},
				NodeName:   nodeNames.of(ep.NodeName), Zone: nodeNames.of(ep.Zone), Hints: ep.Hints}
		}
	}
	return out
}

// trimMeta keeps identity (what keys, events and conflict resolution use) and the
// named labels and annotations; managedFields, owners, finalizers and the rest go.
func trimMeta(m metav1.ObjectMeta, labels, annotations []string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		CreationTimestamp: m.CreationTimestamp,
		Labels:            keep(m.Labels, labels),
		Annotations:       keep(m.Annotations, annotations),
	}
}

// keep returns the entries of m under keys; nil when there are none, so that an
// object without them costs no map.
func keep(m map[string]string, keys []string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			out[k] = v
		}
	}
	return out
}

// Endpoints repeat a few values hundreds of thousands of times: the conditions, and
// the names of the nodes and zones they run in. Cached objects are read-only, so
// they share one copy of each (a 30k x 10 cluster: ~10 MiB).
var condTrue, condFalse = true, false

func sharedBool(p *bool) *bool {
	switch {
	case p == nil:
		return nil
	case *p:
		return &condTrue
	default:
		return &condFalse
	}
}

// nodeNames holds one copy of each node and zone name seen: a cluster has few,
// and a node that goes leaves one string behind.
var nodeNames = &interned{}

type interned struct{ m sync.Map }

func (in *interned) of(p *string) *string {
	if p == nil {
		return nil
	}
	if v, ok := in.m.Load(*p); ok {
		return v.(*string)
	}
	s := *p
	v, _ := in.m.LoadOrStore(s, &s)
	return v.(*string)
}
