package nodeaddr

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func addrs(s string) []netip.Addr {
	var out []netip.Addr
	for _, f := range strings.Fields(s) {
		out = append(out, netip.MustParseAddr(f))
	}
	return out
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      []string
		want    Spec
		wantErr string
	}{
		{name: "empty is all (iptables mode's default)", in: nil, want: Spec{All: true}},
		{name: "keywords and CIDRs mix", in: []string{"primary", "10.1.2.3/8", "localhost", "fd00::/64"},
			want: Spec{Primary: true, Localhost: true, Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/64")}}},
		{name: "all", in: []string{"all"}, want: Spec{All: true}},
		{name: "a bare IP is not a CIDR", in: []string{"10.0.0.1"}, wantErr: `nodePortAddresses[0] "10.0.0.1"`},
		{name: "unknown keyword", in: []string{"primary", "nope"}, wantErr: `nodePortAddresses[1] "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse(%q) error = %v, want %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	local := addrs("127.0.0.1 10.0.0.5 192.168.7.2 172.18.0.3 ::1 fd00::5 fe80::1")
	for _, tc := range []struct {
		name       string
		spec       []string
		primary    string
		want       string
		all4, all6 bool
	}{
		{name: "nothing given: every local address, loopback too", spec: nil,
			want: "10.0.0.5 127.0.0.1 172.18.0.3 192.168.7.2 ::1 fd00::5 fe80::1", all4: true, all6: true},
		{name: "all keyword", spec: []string{"all"},
			want: "10.0.0.5 127.0.0.1 172.18.0.3 192.168.7.2 ::1 fd00::5 fe80::1", all4: true, all6: true},
		{name: "zero CIDR of one family only", spec: []string{"0.0.0.0/0", "fd00::/64"},
			want: "10.0.0.5 127.0.0.1 172.18.0.3 192.168.7.2 fd00::5", all4: true},
		{name: "an IPv4 CIDR leaves IPv6 unrestricted", spec: []string{"10.0.0.0/8"},
			want: "10.0.0.5 ::1 fd00::5 fe80::1", all6: true},
		{name: "two CIDRs", spec: []string{"10.0.0.0/8", "192.168.0.0/16", "fd00::/8"},
			want: "10.0.0.5 192.168.7.2 fd00::5"},
		{name: "primary from the Node", spec: []string{"primary"}, primary: "172.18.0.3 fd00::5",
			want: "172.18.0.3 fd00::5"},
		{name: "primary of one family leaves the other unrestricted", spec: []string{"primary"}, primary: "172.18.0.3",
			want: "172.18.0.3 ::1 fd00::5 fe80::1", all6: true},
		{name: "primary unknown: everything, as kube-proxy with an empty list", spec: []string{"primary"},
			want: "10.0.0.5 127.0.0.1 172.18.0.3 192.168.7.2 ::1 fd00::5 fe80::1", all4: true, all6: true},
		{name: "a loopback primary selects nothing", spec: []string{"primary", "fd00::/64"}, primary: "127.0.0.1",
			want: "10.0.0.5 127.0.0.1 172.18.0.3 192.168.7.2 fd00::5", all4: true},
		{name: "primary not on any interface yet", spec: []string{"primary", "fd00::/64"}, primary: "10.9.9.9",
			want: "fd00::5"},
		{name: "localhost", spec: []string{"localhost"}, want: "127.0.0.1 ::1"},
		{name: "primary plus localhost plus a CIDR", spec: []string{"primary", "localhost", "192.168.0.0/16"}, primary: "172.18.0.3",
			want: "127.0.0.1 172.18.0.3 192.168.7.2 ::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := Parse(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			got := Select(spec, addrs(tc.primary), local)
			want := Selection{AllIPv4: tc.all4, AllIPv6: tc.all6, Addrs: addrs(tc.want)}
			if !got.Equal(want) {
				t.Errorf("Select(%v, primary %q) = %+v, want %+v", spec, tc.primary, got, want)
			}
		})
	}
}

func TestSelectionIPv4(t *testing.T) {
	sel := Selection{AllIPv6: true, Addrs: addrs("10.0.0.5 127.0.0.1 fd00::5")}
	got, all := sel.IPv4()
	if all || !cmp.Equal(got, addrs("10.0.0.5 127.0.0.1"), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })) {
		t.Errorf("IPv4() = %v, %v; want [10.0.0.5 127.0.0.1], false", got, all)
	}
}

// TestSelectionFamilies: a single-stack node keeps only its family's part, so
// its health check ports do not take the other family's wildcard.
func TestSelectionFamilies(t *testing.T) {
	sel := Selection{AllIPv4: true, AllIPv6: true, Addrs: addrs("10.0.0.5 127.0.0.1 fd00::5")}
	for _, tc := range []struct {
		name       string
		v4, v6     bool
		want       string
		all4, all6 bool
	}{
		{name: "IPv4 only", v4: true, want: "10.0.0.5 127.0.0.1", all4: true},
		{name: "IPv6 only", v6: true, want: "fd00::5", all6: true},
		{name: "dual-stack", v4: true, v6: true, want: "10.0.0.5 127.0.0.1 fd00::5", all4: true, all6: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sel.Families(tc.v4, tc.v6)
			want := Selection{AllIPv4: tc.all4, AllIPv6: tc.all6, Addrs: addrs(tc.want)}
			if !got.Equal(want) {
				t.Errorf("Families(%v, %v) = %+v; want %+v", tc.v4, tc.v6, got, want)
			}
		})
	}
}

// TestSelectionPerFamily: each family's proxy gets its own family's addresses
// and its own "all" (fib daddr type local) answer, whatever the other family's.
func TestSelectionPerFamily(t *testing.T) {
	local := addrs("127.0.0.1 10.0.0.5 ::1 fd00::5 2001:db8::7 fe80::1")
	for _, tc := range []struct {
		name         string
		spec         []string
		primary      string
		want4, want6 string
		all4, all6   bool
	}{
		{name: "nothing given: all of both", want4: "10.0.0.5 127.0.0.1", want6: "::1 2001:db8::7 fd00::5 fe80::1", all4: true, all6: true},
		{name: "primary of both families", spec: []string{"primary"}, primary: "10.0.0.5 fd00::5", want4: "10.0.0.5", want6: "fd00::5"},
		{name: "IPv6-primary node", spec: []string{"primary"}, primary: "fd00::5 10.0.0.5", want4: "10.0.0.5", want6: "fd00::5"},
		{name: "primary IPv6 only: IPv4 all", spec: []string{"primary"}, primary: "2001:db8::7",
			want4: "10.0.0.5 127.0.0.1", all4: true, want6: "2001:db8::7"},
		{name: "IPv6 CIDR and IPv4 all", spec: []string{"fd00::/8", "0.0.0.0/0"},
			want4: "10.0.0.5 127.0.0.1", all4: true, want6: "fd00::5"},
		{name: "IPv6 all only, IPv4 CIDR", spec: []string{"::/0", "10.0.0.0/8"},
			want4: "10.0.0.5", want6: "::1 2001:db8::7 fd00::5 fe80::1", all6: true},
		{name: "localhost", spec: []string{"localhost"}, want4: "127.0.0.1", want6: "::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := Parse(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			sel := Select(spec, addrs(tc.primary), local)
			eq := cmp.Comparer(func(a, b netip.Addr) bool { return a == b })
			got4, all4 := sel.IPv4()
			if all4 != tc.all4 || !cmp.Equal(got4, addrs(tc.want4), eq) {
				t.Errorf("IPv4() = %v, %v; want %v, %v", got4, all4, addrs(tc.want4), tc.all4)
			}
			got6, all6 := sel.IPv6()
			if all6 != tc.all6 || !cmp.Equal(got6, addrs(tc.want6), eq) {
				t.Errorf("IPv6() = %v, %v; want %v, %v", got6, all6, addrs(tc.want6), tc.all6)
			}
		})
	}
}

func TestPrimaryIPs(t *testing.T) {
	na := func(typ corev1.NodeAddressType, a string) corev1.NodeAddress {
		return corev1.NodeAddress{Type: typ, Address: a}
	}
	for _, tc := range []struct {
		name   string
		status []corev1.NodeAddress
		bind   string
		want   string
	}{
		{name: "no Node", want: ""},
		{name: "InternalIP before ExternalIP", status: []corev1.NodeAddress{
			na(corev1.NodeHostName, "n1"), na(corev1.NodeExternalIP, "203.0.113.4"), na(corev1.NodeInternalIP, "172.18.0.3")},
			want: "172.18.0.3"},
		{name: "dual-stack: first of the other family second", status: []corev1.NodeAddress{
			na(corev1.NodeInternalIP, "fd00::3"), na(corev1.NodeInternalIP, "fd00::4"), na(corev1.NodeInternalIP, "172.18.0.3")},
			want: "fd00::3 172.18.0.3"},
		{name: "ExternalIP when there is no InternalIP", status: []corev1.NodeAddress{na(corev1.NodeExternalIP, "203.0.113.4")},
			want: "203.0.113.4"},
		{name: "unspecified bind address changes nothing", status: []corev1.NodeAddress{na(corev1.NodeInternalIP, "172.18.0.3")},
			bind: "0.0.0.0", want: "172.18.0.3"},
		{name: "bind address replaces its family", status: []corev1.NodeAddress{
			na(corev1.NodeInternalIP, "fd00::3"), na(corev1.NodeInternalIP, "172.18.0.3")},
			bind: "10.0.0.5", want: "fd00::3 10.0.0.5"},
		{name: "bind address of a family the Node lacks comes first", status: []corev1.NodeAddress{na(corev1.NodeInternalIP, "fd00::3")},
			bind: "10.0.0.5", want: "10.0.0.5 fd00::3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PrimaryIPs(tc.status, tc.bind)
			if !cmp.Equal(got, addrs(tc.want), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })) {
				t.Errorf("PrimaryIPs = %v, want %v", got, addrs(tc.want))
			}
		})
	}
}
