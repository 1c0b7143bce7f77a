package proxy

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

func TestHealthCheckServices(t *testing.T) {
	name := func(svc, port string) endpoints.ServicePortName {
		return endpoints.ServicePortName{Namespace: "ns", Name: svc, Port: port, Protocol: "TCP"}
	}
	ep := func(ip, node string, ready bool) endpoints.Endpoint {
		return endpoints.Endpoint{Port: 80, Ready: ready, Serving: true}.WithAddr(netip.MustParseAddr(ip)).OnNode(node)
	}
	snap := endpoints.NewSnapshot([]endpoints.ServicePort{
		{Name: name("lb", "http"), ExternalLocal: true, HealthCheckNodePort: 32000, NodePort: 30080},
		{Name: name("lb", "https"), ExternalLocal: true, HealthCheckNodePort: 32000, NodePort: 30443},
		{Name: name("empty", ""), ExternalLocal: true, HealthCheckNodePort: 32001, NodePort: 30081},
		{Name: name("cluster", ""), NodePort: 30082},
	}, endpoints.EndpointMap{
		// 10.244.1.2 serves both ports: one endpoint; a not ready one and another
		// node's do not count.
		name("lb", "http"):  {ep("10.244.1.2", "me", true), ep("10.244.1.3", "me", false), ep("10.244.2.2", "other", true)},
		name("lb", "https"): {ep("10.244.1.2", "me", true), ep("10.244.1.4", "me", true)},
		name("empty", ""):   {ep("10.244.2.3", "other", true)},
		name("cluster", ""): {ep("10.244.1.9", "me", true)},
	})
	got := HealthCheckServices(snap, "me")
	want := map[endpoints.ServiceKey]HealthCheckService{
		{Namespace: "ns", Name: "lb"}:    {NodePort: 32000, LocalEndpoints: 2},
		{Namespace: "ns", Name: "empty"}: {NodePort: 32001, LocalEndpoints: 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("HealthCheckServices (-want +got):\n%s", diff)
	}
}

func TestHealthCheckHookCalledOnChange(t *testing.T) {
	var h healthChecks
	var calls []map[endpoints.ServiceKey]HealthCheckService
	hook := func(m map[endpoints.ServiceKey]HealthCheckService) { calls = append(calls, m) }
	k := endpoints.ServiceKey{Namespace: "ns", Name: "lb"}
	sp := endpoints.ServicePort{Name: endpoints.ServicePortName{Namespace: "ns", Name: "lb", Protocol: "TCP"}, ExternalLocal: true, HealthCheckNodePort: 32000}
	h.notify(hook) // the first sync, nothing changed: an empty map all the same
	h.update(endpoints.ServiceKey{Namespace: "ns", Name: "other"}, nil, endpoints.EndpointMap{}, "me")
	h.notify(hook) // nothing with a health check: no call
	h.update(k, []endpoints.ServicePort{sp}, endpoints.EndpointMap{}, "me")
	h.notify(hook)
	h.update(k, []endpoints.ServicePort{sp}, endpoints.EndpointMap{}, "me")
	h.notify(hook) // no change: no call
	h.update(k, nil, endpoints.EndpointMap{}, "me")
	h.notify(hook)
	want := []map[endpoints.ServiceKey]HealthCheckService{{}, {k: {NodePort: 32000}}, {}}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Fatalf("hook calls (-want +got):\n%s", diff)
	}
}

func TestSyncCallsHealthCheckHook(t *testing.T) {
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	var got []map[endpoints.ServiceKey]HealthCheckService
	p := New(Config{Tracker: tr, Kernel: nft.NewFake(), Options: Options{NodeName: "me"},
		OnHealthCheckServices: func(m map[endpoints.ServiceKey]HealthCheckService) { got = append(got, m) }})
	svc := testService("lb", "10.96.0.10", false, httpPort)
	svc.Spec.Type = v1.ServiceTypeLoadBalancer
	svc.Spec.Ports[0].NodePort = 30080
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	svc.Spec.HealthCheckNodePort = 32000
	tr.OnServiceAdd(svc)
	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(t.Context()); err != nil { // nothing changed: no call
		t.Fatal(err)
	}
	want := []map[endpoints.ServiceKey]HealthCheckService{{{Namespace: "ns", Name: "lb"}: {NodePort: 32000}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("hook calls (-want +got):\n%s", diff)
	}
}

func TestSetNodeAddressesQueuesSyncOnChange(t *testing.T) {
	p := New(Config{Tracker: endpoints.NewTracker(endpoints.TrackerOptions{}), Kernel: nft.NewFake()})
	queued := func() bool {
		select {
		case <-p.trigger:
			return true
		default:
			return false
		}
	}
	a := []netip.Addr{netip.MustParseAddr("192.168.1.2"), netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")}
	p.SetNodeAddresses(a, false)
	if !queued() {
		t.Fatal("new addresses did not queue a sync")
	}
	p.SetNodeAddresses([]netip.Addr{a[1], a[0]}, false) // same IPv4 addresses in another order
	if queued() {
		t.Fatal("the same addresses queued a sync")
	}
	p.SetNodeAddresses(a, true)
	if !queued() {
		t.Fatal("switching to all local addresses did not queue a sync")
	}
	if got := p.nodeAddresses(); !got.All || len(got.Addrs) != 2 {
		t.Fatalf("node addresses %+v, want all with the two IPv4 addresses", got)
	}
}
