//go:build e2e

package main

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestParsePodCIDRs(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "10.244.1.0/24", want: "10.244.1.0/24"},
		{in: "10.244.1.0/24,fd00:10:244:1::/64", want: "10.244.1.0/24 fd00:10:244:1::/64"},
		{in: "fd00:10:244:1::/64,10.244.1.0/24", want: "fd00:10:244:1::/64 10.244.1.0/24"},
		{in: "fd00:10:244:1::/64", want: "fd00:10:244:1::/64"},
		{in: "10.244.1.0/16", wantErr: true},
		{in: "fd00:10:244:1::/112", wantErr: true},
		{in: "10.244.1.0/24,10.244.2.0/24", wantErr: true},
		{in: "", wantErr: true},
	} {
		got, err := parsePodCIDRs(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("parsePodCIDRs(%q): error %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		if !tc.wantErr && strings.Join(s, " ") != tc.want {
			t.Errorf("parsePodCIDRs(%q) = %v, want %s", tc.in, s, tc.want)
		}
	}
}

func TestPodIPs(t *testing.T) {
	cidrs, err := parsePodCIDRs("10.244.2.0/24,fd00:10:244:2::/64")
	if err != nil {
		t.Fatal(err)
	}
	got := podIPs(cidrs, 17)
	want := []netip.Addr{netip.MustParseAddr("10.244.2.17"), netip.MustParseAddr("fd00:10:244:2::11")}
	if !slices.Equal(got, want) {
		t.Errorf("podIPs = %v, want %v", got, want)
	}
}

// An IPv4-only pod is wired exactly as before families existed; a
// dual-stack pod gets the IPv6 gateway, address and routes too.
func TestWireSteps(t *testing.T) {
	for _, tc := range []struct {
		name string
		ips  []string
		want []string
	}{
		{"ipv4", []string{"10.244.1.5"}, []string{
			"netns add pod5",
			"-n pod5 link set lo up",
			"-n node link add vp5 type veth peer name eth0 netns pod5",
			"-n node addr add 169.254.1.1/32 dev vp5",
			"-n pod5 addr add 10.244.1.5/32 dev eth0",
			"-n node link set vp5 up",
			"-n pod5 link set eth0 up",
			"-n node route add 10.244.1.5/32 dev vp5 scope link",
			"-n pod5 route add 169.254.1.1/32 dev eth0 scope link",
			"-n pod5 route add default via 169.254.1.1 dev eth0",
		}},
		{"dual", []string{"10.244.1.5", "fd00:10:244:1::5"}, []string{
			"netns add pod5",
			"-n pod5 link set lo up",
			"-n node link add vp5 type veth peer name eth0 netns pod5",
			"-n node addr add 169.254.1.1/32 dev vp5",
			"-n pod5 addr add 10.244.1.5/32 dev eth0",
			"-n node addr add fe80::1/64 dev vp5 nodad",
			"-n pod5 addr add fd00:10:244:1::5/128 dev eth0 nodad",
			"-n node link set vp5 up",
			"-n pod5 link set eth0 up",
			"-n node route add 10.244.1.5/32 dev vp5 scope link",
			"-n pod5 route add 169.254.1.1/32 dev eth0 scope link",
			"-n pod5 route add default via 169.254.1.1 dev eth0",
			"-n node route add fd00:10:244:1::5/128 dev vp5",
			"-n pod5 -6 route add default via fe80::1 dev eth0",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &pod{netns: "pod5", idx: 5}
			for _, ip := range tc.ips {
				p.ips = append(p.ips, netip.MustParseAddr(ip))
			}
			var got []string
			for _, s := range wireSteps("node", p) {
				got = append(got, strings.Join(s, " "))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("wireSteps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
