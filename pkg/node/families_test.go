package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
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
			if got := PrimaryFamily(tc.status, tc.bind); got != tc.want {
				t.Errorf("PrimaryFamily = %s, want %s", got, tc.want)
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
			got, err := ServedFamilies(tc.primary, tc.usable)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := fmt.Sprint(got); s != tc.want {
				t.Errorf("ServedFamilies = %s, want %s", s, tc.want)
			}
		})
	}
}

func TestIPv6Enabled(t *testing.T) {
	proc := func(ifInet6 bool, disable string) string {
		root := t.TempDir()
		writeFile := func(t *testing.T, path, data string) {
			if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
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
