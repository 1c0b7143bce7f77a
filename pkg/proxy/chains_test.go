package proxy

import (
	"net/netip"
	"testing"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

func lbPort(name, ip string) ([]endpoints.ServicePort, endpoints.EndpointMap) {
	n := endpoints.ServicePortName{Namespace: "ns", Name: name, Port: "http", Protocol: "TCP"}
	ports := []endpoints.ServicePort{{Name: n, ClusterIP: netip.MustParseAddr(ip), Port: 80}}
	eps := endpoints.EndpointMap{n: {endpoints.Endpoint{Port: 80, Ready: true}.WithAddr(netip.MustParseAddr("10.244.1.2"))}}
	return ports, eps
}

// RenderService is a pure function: what one call returns is its caller's alone.
func TestRenderServiceSharesNoState(t *testing.T) {
	ports, eps := lbPort("a", "10.96.0.10")
	first := RenderService(ports, eps, "node-a")
	first.Shared[0].Rules = nil // a caller may do what it likes with its value
	second := RenderService(ports, eps, "node-a")
	if len(second.Shared) != 1 || len(second.Shared[0].Rules) != 1 {
		t.Fatalf("a second render saw the first caller's change: %+v", second.Shared)
	}
}

// One lb chain value per name is kept for every Service that uses it (the memory
// note in docs/bench.md), by the Proxy rather than by render.
func TestSharedChainsKeepOneValuePerChain(t *testing.T) {
	lb := sharedChains{}
	pa, ea := lbPort("a", "10.96.0.10")
	pb, eb := lbPort("b", "10.96.1.10") // same shard, same endpoint count
	a := lb.intern(RenderService(pa, ea, "node-a"))
	b := lb.intern(RenderService(pb, eb, "node-a"))
	if a.Shared[0].Name != "lb-1-10" || a.Shared[0] != b.Shared[0] {
		t.Fatalf("two Services hold %p (%s) and %p (%s), want one value", a.Shared[0], a.Shared[0].Name, b.Shared[0], b.Shared[0].Name)
	}
}
