package offline

import (
	"net/netip"
	"strings"
	"testing"
)

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
		pkt, err := ParsePacket(tc.pos)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParsePacket(%q) = %v, want %q", tc.pos, err, tc.wantErr)
			}
			continue
		}
		if err != nil || pkt.Dst != netip.MustParseAddr(tc.dst) || pkt.DPort != tc.port {
			t.Errorf("ParsePacket(%q) = %+v, %v; want %s port %d", tc.pos, pkt, err, tc.dst, tc.port)
		}
	}
}
