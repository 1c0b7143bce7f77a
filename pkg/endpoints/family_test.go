package endpoints

import (
	"net/netip"
	"testing"
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
