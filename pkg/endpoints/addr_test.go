package endpoints

import (
	"strings"
	"testing"
)

func TestParseIP(t *testing.T) {
	tests := []struct {
		in      string
		want    string // "" means an error is expected
		errPart string
	}{
		{in: "10.96.0.1", want: "10.96.0.1"},
		{in: "fd00::10", want: "fd00::10"},
		{in: "010.096.000.001", want: "10.96.0.1"}, // legacy leading zeros are decimal, not octal
		{in: "10.0.0.08", want: "10.0.0.8"},
		{in: "", errPart: "parse IP"},
		{in: "not-an-ip", errPart: "parse IP"},
		{in: "10.0.0.256", errPart: "parse IP"},
		{in: "10.0.0.0001", errPart: "parse IP"},
		{in: "10.0.0", errPart: "parse IP"},
		{in: "10..0.1", errPart: "parse IP"},
		{in: "10.0.0.-1", errPart: "parse IP"},
		{in: "fe80::1%eth0", errPart: "zones"},
		{in: "0.0.0.0", errPart: "unspecified"},
		{in: "::", errPart: "unspecified"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseIP(tt.in)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("parseIP(%q) = %v, want error", tt.in, got)
				}
				if !strings.Contains(err.Error(), tt.errPart) || !strings.Contains(err.Error(), tt.in) {
					t.Errorf("error %q should mention %q and the input", err, tt.errPart)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseIP(%q): %v", tt.in, err)
			}
			mustEqualf(t, got, addr(tt.want), "parseIP(%q)", tt.in)
		})
	}
}

func TestParseIPOfFamily(t *testing.T) {
	if _, err := parseIPOfFamily("fd00::1", IPv4); err == nil || !strings.Contains(err.Error(), "not IPv4") {
		t.Errorf("IPv6 address for IPv4: err = %v, want 'not IPv4'", err)
	}
	if got, err := parseIPOfFamily("fd00::1", IPv6); err != nil || got != addr("fd00::1") {
		t.Errorf("IPv6 address for IPv6 = %v, %v", got, err)
	}
	if _, err := parseIPOfFamily("bogus", IPv4); err == nil {
		t.Error("bogus address: want error")
	}
}
