package main

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/healthcheck"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

func TestPrimaryFamily(t *testing.T) {
	internal := func(ips ...string) []corev1.NodeAddress {
		var out []corev1.NodeAddress
		for _, ip := range ips {
			out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		status []corev1.NodeAddress
		bind   string
		want   endpoints.Family
	}{
		{name: "nothing known: IPv4, as kube-proxy", want: endpoints.IPv4},
		{name: "unspecified IPv6 bind address says nothing", bind: "::", want: endpoints.IPv4},
		{name: "IPv6 Node", status: internal("fd00::3"), want: endpoints.IPv6},
		{name: "dual-stack Node, IPv6 first", status: internal("fd00::3", "172.18.0.3"), want: endpoints.IPv6},
		{name: "dual-stack Node, IPv4 first", status: internal("172.18.0.3", "fd00::3"), want: endpoints.IPv4},
		{name: "bind address decides over the Node", status: internal("172.18.0.3", "fd00::3"), bind: "fd00::3", want: endpoints.IPv6},
		{name: "IPv4 bind address on an IPv6 Node", status: internal("fd00::3"), bind: "10.0.0.5", want: endpoints.IPv4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := primaryFamily(tc.status, tc.bind); got != tc.want {
				t.Errorf("primaryFamily = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestServedFamilies(t *testing.T) {
	unusable := func(bad ...endpoints.Family) func(endpoints.Family) error {
		return func(f endpoints.Family) error {
			for _, b := range bad {
				if f == b {
					return errors.New("no")
				}
			}
			return nil
		}
	}
	for _, tc := range []struct {
		name    string
		primary endpoints.Family
		usable  func(endpoints.Family) error
		want    string
		wantErr string
	}{
		{name: "both usable: dual-stack, IPv4 first", primary: endpoints.IPv4, usable: unusable(), want: "[IPv4 IPv6]"},
		{name: "IPv6-primary dual-stack", primary: endpoints.IPv6, usable: unusable(), want: "[IPv6 IPv4]"},
		{name: "no IPv6: single-stack", primary: endpoints.IPv4, usable: unusable(endpoints.IPv6), want: "[IPv4]"},
		{name: "IPv6-only node", primary: endpoints.IPv6, usable: unusable(endpoints.IPv4), want: "[IPv6]"},
		{name: "primary unusable fails", primary: endpoints.IPv6, usable: unusable(endpoints.IPv6), wantErr: "no support for primary IP family IPv6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := servedFamilies(tc.primary, tc.usable)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := familiesString(got); s != tc.want {
				t.Errorf("servedFamilies = %s, want %s", s, tc.want)
			}
		})
	}
}

func familiesString(fs []endpoints.Family) string {
	var parts []string
	for _, f := range fs {
		parts = append(parts, f.String())
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func TestIPv6Enabled(t *testing.T) {
	proc := func(ifInet6 bool, disable string) string {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "net"), 0o755); err != nil {
			t.Fatal(err)
		}
		if ifInet6 {
			writeFile(t, filepath.Join(root, "net", "if_inet6"), "")
		}
		if disable != "" {
			dir := filepath.Join(root, "sys", "net", "ipv6", "conf", "all")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "disable_ipv6"), disable)
		}
		return root
	}
	for _, tc := range []struct {
		name    string
		root    string
		wantErr string
	}{
		{name: "enabled", root: proc(true, "0\n")},
		{name: "no sysctl file: enabled", root: proc(true, "")},
		{name: "no IPv6 in the kernel", root: proc(false, ""), wantErr: "no kernel support for IPv6"},
		{name: "disabled", root: proc(true, "1\n"), wantErr: "disable_ipv6=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ipv6Enabled(tc.root)
			if (err != nil) != (tc.wantErr != "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ipv6Enabled = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestDualStackFlags: kube-proxy's validation of --cluster-cidr, and
// --nodeport-addresses with CIDRs of both families and primary.
func TestDualStackFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "dual-stack pair", args: []string{"--cluster-cidr", "10.244.0.0/16,fd00:244::/56"}},
		{name: "IPv6 only", args: []string{"--cluster-cidr", "fd00:244::/56"}},
		{name: "two IPv6 CIDRs", args: []string{"--cluster-cidr", "fd00:1::/56,fd00:2::/56"},
			wantErr: `clusterCIDR: Invalid value: "fd00:1::/56,fd00:2::/56": must be a either a single CIDR or dual-stack pair of CIDRs`},
		{name: "three CIDRs", args: []string{"--cluster-cidr", "10.1.0.0/16,fd00::/56,10.2.0.0/16"},
			wantErr: `must be a either a single CIDR or dual-stack pair of CIDRs`},
		{name: "nodeport addresses of both families and primary", args: []string{"--nodeport-addresses", "10.0.0.0/8,fd00::/64,primary"}},
		{name: "bad IPv6 nodeport CIDR", args: []string{"--nodeport-addresses", "fd00::/129"}, wantErr: `nodePortAddresses[0]: Invalid value: "fd00::/129"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			silenceStderr(t)
			_, err := parseFlags(tc.args)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("parseFlags(%q) = %v, want %q", tc.args, err, tc.wantErr)
			}
		})
	}
}

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
	v4() // later syncs keep calling: takeoverAfterSync retries a failed takeover and stops once done
	if calls != 2 {
		t.Fatalf("calls = %d, want 2", calls)
	}
}

func TestParsePacketIPv6(t *testing.T) {
	for _, tc := range []struct {
		pos     []string
		dst     string
		port    uint16
		wantErr string
	}{
		{pos: []string{"fd00:244::9", "[fd00:96::20]:80"}, dst: "fd00:96::20", port: 80},
		{pos: []string{"fd00:244::9", "[fd00:96::20]:53/udp"}, dst: "fd00:96::20", port: 53},
		{pos: []string{"fd00:244::9", "fd00:96::20:80"}, wantErr: "in brackets"},
		{pos: []string{"10.244.2.9", "10.96.0.10:80"}, dst: "10.96.0.10", port: 80},
	} {
		pkt, err := parsePacket(tc.pos)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parsePacket(%q) = %v, want %q", tc.pos, err, tc.wantErr)
			}
			continue
		}
		if err != nil || pkt.Dst != netip.MustParseAddr(tc.dst) || pkt.DPort != tc.port {
			t.Errorf("parsePacket(%q) = %+v, %v; want %s port %d", tc.pos, pkt, err, tc.dst, tc.port)
		}
	}
}
