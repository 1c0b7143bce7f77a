package agent

import (
	"net/netip"
	"testing"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/healthcheck"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

// TestHealthCheckMerge: a dual-stack Local Service has one health check node
// port; it answers with the larger family's local endpoint count.
func TestHealthCheckMerge(t *testing.T) {
	web := endpoints.ServiceKey{Namespace: "default", Name: "web"}
	v4only := endpoints.ServiceKey{Namespace: "default", Name: "v4"}
	got := mergeHealthChecks(map[endpoints.Family]map[endpoints.ServiceKey]proxy.HealthCheckService{
		endpoints.IPv4: {web: {NodePort: 32100, LocalEndpoints: 1}, v4only: {NodePort: 32101, LocalEndpoints: 0}},
		endpoints.IPv6: {web: {NodePort: 32100, LocalEndpoints: 2}},
	})
	want := map[endpoints.ServiceKey]healthcheck.Service{web: {NodePort: 32100, LocalEndpoints: 2}, v4only: {NodePort: 32101}}
	if len(got) != len(want) || got[web] != want[web] || got[v4only] != want[v4only] {
		t.Errorf("merged = %v, want %v", got, want)
	}
}

// TestTakeoverAfterEveryFamilySynced: kube-proxy's rules go only once both
// families' tables serve.
func TestTakeoverAfterEveryFamilySynced(t *testing.T) {
	calls := 0
	synced := allSynced([]endpoints.Family{endpoints.IPv4, endpoints.IPv6}, func() { calls++ })
	v4, v6 := synced(endpoints.IPv4), synced(endpoints.IPv6)
	v4()
	v4()
	if calls != 0 {
		t.Fatalf("takeover after the IPv4 sync alone")
	}
	v6()
	if calls != 1 {
		t.Fatalf("takeover calls after both synced = %d, want 1", calls)
	}
	v4() // later syncs keep calling: takeover.AfterSync retries a failed takeover and stops once done
	if calls != 2 {
		t.Fatalf("calls = %d, want 2", calls)
	}
}

// TestProxySettingsPerFamily: serve and render build each family's proxy.Options
// the same way: the family's own entry of the cluster CIDR, localhost NodePorts
// for IPv4 only, the rest as given.
func TestProxySettingsPerFamily(t *testing.T) {
	s := ProxySettings{ClusterCIDR: "10.244.0.0/16,fd00:244::/56", MasqueradeAll: true, NodeName: "me", LocalhostNodePorts: true, ConntrackTCPLiberal: true}
	for _, tc := range []struct {
		family endpoints.Family
		want   proxy.Options
	}{
		{endpoints.IPv4, proxy.Options{Family: endpoints.IPv4, ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"), MasqueradeAll: true, NodeName: "me", LocalhostNodePorts: true, ConntrackTCPLiberal: true}},
		{endpoints.IPv6, proxy.Options{Family: endpoints.IPv6, ClusterCIDR: netip.MustParsePrefix("fd00:244::/56"), MasqueradeAll: true, NodeName: "me", ConntrackTCPLiberal: true}},
	} {
		if got := s.Options(tc.family); got != tc.want {
			t.Errorf("%s: options %+v, want %+v", tc.family, got, tc.want)
		}
	}
}
