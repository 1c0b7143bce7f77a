package offline

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/svcproxy/svcproxy/pkg/nft"
)

var protoByName = map[string]uint8{"tcp": nft.ProtoTCP, "udp": nft.ProtoUDP, "sctp": nft.ProtoSCTP, "icmp": nft.ProtoICMP}

// ParsePacket reads trace's "SRC DST:PORT[/PROTO] [local]".
func ParsePacket(pos []string) (nft.Packet, error) {
	if len(pos) < 2 || len(pos) > 3 || (len(pos) == 3 && pos[2] != "local") {
		return nft.Packet{}, fmt.Errorf("want SRC DST:PORT[/PROTO] [local], got %q", pos)
	}
	src, err := netip.ParseAddr(pos[0])
	if err != nil {
		return nft.Packet{}, fmt.Errorf("source: %w", err)
	}
	dst, protoName, _ := strings.Cut(pos[1], "/")
	if protoName == "" {
		protoName = "tcp"
	}
	proto, ok := protoByName[strings.ToLower(protoName)]
	if !ok {
		return nft.Packet{}, fmt.Errorf("unknown protocol %q", protoName)
	}
	host, port, err := splitHostPort(dst)
	if err != nil {
		return nft.Packet{}, err
	}
	return nft.Packet{Src: src, Dst: host, Proto: proto, DPort: port, Local: len(pos) == 3}, nil
}

// splitHostPort reads ADDR:PORT, or [ADDR]:PORT for IPv6.
func splitHostPort(s string) (netip.Addr, uint16, error) {
	if strings.HasPrefix(s, "[") {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}, 0, fmt.Errorf("destination: %w", err)
		}
		return ap.Addr(), ap.Port(), nil
	}
	if strings.Count(s, ":") > 1 {
		return netip.Addr{}, 0, fmt.Errorf("destination %q: write an IPv6 address in brackets, [ADDR]:PORT", s)
	}
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return netip.Addr{}, 0, fmt.Errorf("destination %q has no port", s)
	}
	a, err := netip.ParseAddr(s[:i])
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("destination: %w", err)
	}
	p, err := strconv.ParseUint(s[i+1:], 10, 16)
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("destination port: %w", err)
	}
	return a, uint16(p), nil
}
