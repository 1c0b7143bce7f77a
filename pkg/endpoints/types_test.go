package endpoints

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestServicePortNameString(t *testing.T) {
	tests := []struct {
		in   ServicePortName
		want string
	}{
		{ServicePortName{Namespace: "ns", Name: "web", Port: "http", Protocol: "TCP"}, "ns/web:http/TCP"},
		{ServicePortName{Namespace: "ns", Name: "dns", Port: "", Protocol: "UDP"}, "ns/dns/UDP"},
		{ServicePortName{Namespace: "kube-system", Name: "x", Port: "p", Protocol: "SCTP"}, "kube-system/x:p/SCTP"},
	}
	for _, tt := range tests {
		mustEqualf(t, tt.in.String(), tt.want, "%#v.String()", tt.in)
	}
}

func TestServicePortNameKey(t *testing.T) {
	n := ServicePortName{Namespace: "ns", Name: "web", Port: "http", Protocol: "TCP"}
	mustEqualf(t, n.Key(), ServiceKey{"ns", "web"}, "Key")
	mustEqualf(t, n.Key().String(), "ns/web", "ServiceKey.String")
}

func TestFamilyString(t *testing.T) {
	mustEqualf(t, IPv4.String(), "IPv4", "IPv4")
	mustEqualf(t, IPv6.String(), "IPv6", "IPv6")
	mustEqualf(t, Family(9).String(), "Family(9)", "unknown family")
	mustEqualf(t, Family(0), IPv4, "zero Family")
}

func TestFamilyMatches(t *testing.T) {
	tests := []struct {
		fam  Family
		ip   string
		want bool
	}{
		{IPv4, "10.0.0.1", true},
		{IPv4, "fd00::1", false},
		{IPv4, "::ffff:10.0.0.1", false},
		{IPv6, "fd00::1", true},
		{IPv6, "10.0.0.1", false},
		{IPv6, "::ffff:10.0.0.1", false},
		{Family(7), "10.0.0.1", false},
	}
	for _, tt := range tests {
		mustEqualf(t, tt.fam.matches(addr(tt.ip)), tt.want, "%s.matches(%s)", tt.fam, tt.ip)
	}
}

// Snapshots built from lists of ports (NewSnapshot) sort each Service's ports.
func TestNewSnapshotSortsPorts(t *testing.T) {
	mk := func(svc, port string) ServicePort {
		return ServicePort{Name: ServicePortName{Namespace: "ns", Name: svc, Port: port, Protocol: "TCP"}, Port: 80}
	}
	snap := NewSnapshot([]ServicePort{mk("a", "z"), mk("a", "b"), mk("other", "b")}, nil)
	if snap.PortCount() != 3 || snap.Port(mk("a", "z").Name) != mk("a", "z") || snap.Port(mk("b", "x").Name) != (ServicePort{}) {
		t.Errorf("PortCount %d, Port(a/z) %v, Port(b/x) %v", snap.PortCount(), snap.Port(mk("a", "z").Name), snap.Port(mk("b", "x").Name))
	}
	got := snap.ServicePortsOf(ServiceKey{"ns", "a"})
	want := []ServicePort{mk("a", "b"), mk("a", "z")}
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Errorf("ServicePortsOf (-want +got):\n%s", diff)
	}
	if got := snap.ServicePortsOf(ServiceKey{"ns", "missing"}); got != nil {
		t.Errorf("ServicePortsOf(missing) = %v, want nil", got)
	}
}

func TestEndpointAddrPort(t *testing.T) {
	e := Endpoint{Port: 8080}.WithAddr(addr("10.1.0.1"))
	mustEqualf(t, e.AddrPort().String(), "10.1.0.1:8080", "AddrPort")
}
