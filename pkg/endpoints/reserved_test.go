package endpoints

import (
	"net/netip"
	"testing"
)

func TestReservedReason(t *testing.T) {
	tests := []struct {
		addr     string
		reserved bool
	}{
		{"10.96.0.10", false},
		{"192.168.1.1", false},
		{"1.0.0.1", false},
		{"223.255.255.255", false},
		{"255.255.255.254", false},
		{"fd00::10", false},
		{"2001:db8::1", false},
		{"127.0.0.1", true},
		{"127.255.0.9", true},
		{"0.0.0.0", true},
		{"0.1.2.3", true},
		{"169.254.169.254", true},
		{"224.0.0.1", true},
		{"239.255.255.250", true},
		{"255.255.255.255", true},
		{"::1", true},
		{"::", true},
		{"fe80::1", true},
		{"febf::1", true},
		{"ff02::1", true},
		{"ff05::2", true},
		{"::ffff:127.0.0.1", true},
	}
	for _, tc := range tests {
		t.Run(tc.addr, func(t *testing.T) {
			got := ReservedReason(netip.MustParseAddr(tc.addr))
			if (got != "") != tc.reserved {
				t.Fatalf("ReservedReason(%s) = %q, want reserved %v", tc.addr, got, tc.reserved)
			}
		})
	}
}
