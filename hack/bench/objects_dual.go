package main

import (
	"net/netip"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/svcproxy/svcproxy/internal/benchworld"
)

// The dual-stack objects (-family dual): Service i is objects.service(i) with a
// second ClusterIP, addr6(ServicePf6, i), and its endpoints have a second slice of
// the same size, IPv6 ones from EndpointPf6 numbered as the IPv4 ones, as the
// EndpointSlice controller writes one slice per family.

func clusterIP6(i int) netip.Addr { return benchworld.Addr6(benchworld.ServicePf6, i) }

func endpoint6(k int) netip.Addr { return benchworld.Addr6(benchworld.EndpointPf6, k) }

// dualService is Service i, RequireDualStack with IPv4 first.
func (o objects) dualService(i int) *v1.Service {
	s := o.service(i)
	s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, clusterIP6(i).String())
	s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	policy := v1.IPFamilyPolicyRequireDualStack
	s.Spec.IPFamilyPolicy = &policy
	return s
}

// slice6 is slice's IPv6 twin: the same endpoint numbers in EndpointPf6, gen > 0
// moving the first one.
func (o objects) slice6(i, gen int, trigger time.Time) *discoveryv1.EndpointSlice {
	s := o.slice(i, gen, trigger)
	s.Name = "svc-" + strconv.Itoa(i) + "-y"
	s.AddressType = discoveryv1.AddressTypeIPv6
	for j := range s.Endpoints {
		s.Endpoints[j].Addresses = []string{endpoint6(endpointNumber(i, j, gen, o.endpoints)).String()}
	}
	return s
}
