package healthcheck

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nodeaddr"
)

// TestServerRealSockets opens health check node ports in a namespace of its own
// and asks them over TCP, as a load balancer would.
func TestServerRealSockets(t *testing.T) {
	ns := netnstest.New(t, "hcnp")
	ns.MustRun(t, "ip", "link", "add", "h0", "type", "veth", "peer", "name", "h1")
	ns.MustRun(t, "ip", "addr", "add", "10.0.0.5/24", "dev", "h0")
	ns.MustRun(t, "ip", "addr", "add", "10.0.1.5/24", "dev", "h1")
	ns.MustRun(t, "ip", "link", "set", "h0", "up")
	ns.MustRun(t, "ip", "link", "set", "h1", "up")

	var healthy atomic.Bool
	healthy.Store(true)
	failures := prometheus.NewCounter(prometheus.CounterOpts{Name: "f"})
	var reported []string
	s := New(Config{
		Healthy:        healthy.Load,
		Listen:         ns.Listen,
		ListenFailures: failures,
		OnListenError: func(svc endpoints.ServiceKey, port uint16, err error) {
			reported = append(reported, fmt.Sprintf("%s %d", svc, port))
		},
	})
	defer s.Close()
	s.SetAddresses(nodeaddr.Selection{Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.5")}})

	web := endpoints.ServiceKey{Namespace: "default", Name: "web"}
	db := endpoints.ServiceKey{Namespace: "prod", Name: "db"}
	s.Sync(map[endpoints.ServiceKey]Service{web: {NodePort: 31001, LocalEndpoints: 2}, db: {NodePort: 31002}})

	get := func(addr string) (int, string, string) {
		t.Helper()
		resp, err := ns.HTTPClient(2 * time.Second).Get("http://" + addr + "/")
		if err != nil {
			return 0, err.Error(), ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get("X-Load-Balancing-Endpoint-Weight")
	}
	expect := func(addr string, code int, bodyHas, weight string) {
		t.Helper()
		gotCode, gotBody, gotWeight := get(addr)
		if gotCode != code || !strings.Contains(gotBody, bodyHas) || gotWeight != weight {
			t.Errorf("GET %s = %d %q weight %q; want %d containing %q weight %q", addr, gotCode, gotBody, gotWeight, code, bodyHas, weight)
		}
	}

	expect("10.0.0.5:31001", 200, `"localEndpoints": 2,`, "2")
	expect("10.0.0.5:31002", 503, `"namespace": "prod"`, "0")
	// Only the selected address listens.
	expect("10.0.1.5:31001", 0, "connection refused", "")

	healthy.Store(false)
	expect("10.0.0.5:31001", 503, `"serviceProxyHealthy": false`, "2")
	healthy.Store(true)

	// Endpoint counts change in place; a Service that goes closes its port.
	s.Sync(map[endpoints.ServiceKey]Service{web: {NodePort: 31001, LocalEndpoints: 0}})
	expect("10.0.0.5:31001", 503, `"localEndpoints": 0,`, "0")
	expect("10.0.0.5:31002", 0, "connection refused", "")

	// A changed port moves.
	s.Sync(map[endpoints.ServiceKey]Service{web: {NodePort: 31003, LocalEndpoints: 1}})
	expect("10.0.0.5:31001", 0, "connection refused", "")
	expect("10.0.0.5:31003", 200, `"localEndpoints": 1,`, "1")

	// New NodePort addresses: every port reopens there.
	s.SetAddresses(nodeaddr.Selection{Addrs: []netip.Addr{netip.MustParseAddr("10.0.1.5")}})
	expect("10.0.1.5:31003", 200, `"name": "web"`, "1")
	expect("10.0.0.5:31003", 0, "connection refused", "")
	s.SetAddresses(nodeaddr.Selection{AllIPv4: true, AllIPv6: true})
	expect("10.0.0.5:31003", 200, `"name": "web"`, "1")
	expect("127.0.0.1:31003", 200, `"name": "web"`, "1")

	// A port another program holds: reported and counted once, retried every
	// Sync, served once free.
	var busy net.Listener
	busy, err := ns.Listen("tcp", "10.0.1.5:31004")
	if err != nil {
		t.Fatal(err)
	}
	want := map[endpoints.ServiceKey]Service{web: {NodePort: 31003, LocalEndpoints: 1}, db: {NodePort: 31004, LocalEndpoints: 1}}
	s.Sync(want)
	s.Sync(want)
	if got := testutil.ToFloat64(failures); got != 1 || len(reported) != 1 || reported[0] != "prod/db 31004" {
		t.Errorf("after two Syncs on a busy port: failures = %v, reported %q; want 1, [prod/db 31004]", got, reported)
	}
	if _, ok := s.Ports()[db]; ok {
		t.Errorf("Ports() = %v, want no prod/db while its port is busy", s.Ports())
	}
	busy.Close()
	s.Sync(want)
	expect("10.0.0.5:31004", 200, `"name": "db"`, "1")
	expect("10.0.0.5:31003", 200, `"name": "web"`, "1")

	s.Close()
	expect("10.0.0.5:31003", 0, "connection refused", "")
}

// TestServerIPv6Sockets: on a dual-stack node the health check node ports
// answer on the selected IPv6 addresses (and not on another one), then, with
// every IPv6 address selected, on any of them while IPv4 stays restricted.
func TestServerIPv6Sockets(t *testing.T) {
	ns := netnstest.New(t, "hcnp6")
	ns.MustRun(t, "sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0")
	ns.MustRun(t, "ip", "link", "add", "h0", "type", "veth", "peer", "name", "h1")
	ns.MustRun(t, "ip", "addr", "add", "10.0.0.5/24", "dev", "h0")
	ns.MustRun(t, "ip", "addr", "add", "10.0.1.5/24", "dev", "h1")
	ns.MustRun(t, "ip", "-6", "addr", "add", "fd00:18::3/64", "dev", "h0", "nodad")
	ns.MustRun(t, "ip", "-6", "addr", "add", "fd00:19::3/64", "dev", "h1", "nodad")
	ns.MustRun(t, "ip", "link", "set", "h0", "up")
	ns.MustRun(t, "ip", "link", "set", "h1", "up")

	s := New(Config{Listen: ns.Listen})
	defer s.Close()
	a := netip.MustParseAddr
	s.SetAddresses(nodeaddr.Selection{Addrs: []netip.Addr{a("10.0.0.5"), a("fd00:18::3")}})
	web := endpoints.ServiceKey{Namespace: "default", Name: "web"}
	s.Sync(map[endpoints.ServiceKey]Service{web: {NodePort: 31006, LocalEndpoints: 1}})

	answers := func(addr string) bool {
		resp, err := ns.HTTPClient(2 * time.Second).Get("http://" + addr + "/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 200 && strings.Contains(string(b), `"localEndpoints": 1`)
	}
	expect := func(addr string, want bool) {
		t.Helper()
		if got := answers(addr); got != want {
			t.Errorf("%s answers: %v, want %v", addr, got, want)
		}
	}
	expect("[fd00:18::3]:31006", true)
	expect("10.0.0.5:31006", true)
	expect("[fd00:19::3]:31006", false)
	expect("10.0.1.5:31006", false)

	s.SetAddresses(nodeaddr.Selection{AllIPv6: true, Addrs: []netip.Addr{a("10.0.0.5"), a("::1"), a("fd00:18::3"), a("fd00:19::3")}})
	expect("[fd00:19::3]:31006", true)
	expect("[::1]:31006", true)
	expect("10.0.0.5:31006", true)
	expect("10.0.1.5:31006", false)
}
