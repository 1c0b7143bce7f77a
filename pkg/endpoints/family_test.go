package endpoints

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestFamilyOf(t *testing.T) {
	for _, tc := range []struct {
		addr        string
		want, other Family
	}{
		{"10.0.0.1", IPv4, IPv6},
		{"::ffff:10.0.0.1", IPv4, IPv6}, // a node address written mapped is the IPv4 one
		{"fd00::1", IPv6, IPv4},
		{"::", IPv6, IPv4},
	} {
		got := FamilyOf(netip.MustParseAddr(tc.addr))
		if got != tc.want || got.Other() != tc.other {
			t.Errorf("FamilyOf(%s) = %v (other %v), want %v (other %v)", tc.addr, got, got.Other(), tc.want, tc.other)
		}
	}
}

// TestSkippedServicesCostNoAllocation: each tracker of a dual-stack node sees
// every Service and skips the other family's single-stack ones, as it skips
// headless and ExternalName Services: 100k of them at 100k Services, so a
// skip must not allocate (it made an error value for each).
func TestSkippedServicesCostNoAllocation(t *testing.T) {
	for _, tc := range []struct {
		name string
		fam  Family
		svc  *v1.Service
	}{
		{"IPv4 Service, IPv6 tracker", IPv6, makeService("ns", "v4", "10.96.0.1", []v1.ServicePort{tcpPort("http", 80)})},
		{"IPv6 Service, IPv4 tracker", IPv4, makeService("ns", "v6", "fd00::1", []v1.ServicePort{tcpPort("http", 80)})},
		{"headless", IPv4, makeService("ns", "headless", v1.ClusterIPNone, []v1.ServicePort{tcpPort("http", 80)})},
		{"ExternalName", IPv4, makeService("ns", "dns", "", nil, func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeExternalName })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reported []error
			report := func(err error) { reported = append(reported, err) }
			if got := testing.AllocsPerRun(100, func() {
				if ports := servicePorts(tc.svc, tc.fam, report); ports != nil {
					t.Fatalf("ports %v, want the Service skipped", ports)
				}
			}); got != 0 {
				t.Errorf("%v allocations a skipped Service, want 0", got)
			}
			if len(reported) > 0 {
				t.Errorf("reported %v for a skipped Service, want nothing", reported)
			}
		})
	}
}
