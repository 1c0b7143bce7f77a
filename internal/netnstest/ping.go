package netnstest

import (
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"github.com/svcproxy/svcproxy/internal/netns"
)

// Ping sends one ICMP echo request from inside the namespace and reports whether an
// echo reply from dst came back within timeout. It uses a raw socket (root), so
// tests need no ping binary.
func (ns *NS) Ping(dst string, timeout time.Duration) (bool, error) {
	var c net.PacketConn
	if err := netns.Do(ns.Path(), func() error {
		var err error
		c, err = net.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	}); err != nil {
		return false, fmt.Errorf("icmp socket in %s: %w", ns.Name, err)
	}
	defer c.Close()
	const id, seq = 0x5350, 1
	msg := []byte{8, 0, 0, 0, id >> 8, id & 0xff, 0, seq, 's', 'v', 'c', 'p'}
	binary.BigEndian.PutUint16(msg[2:], Checksum(msg))
	addr := &net.IPAddr{IP: net.ParseIP(dst)}
	if _, err := c.WriteTo(msg, addr); err != nil {
		return false, fmt.Errorf("send echo to %s: %w", dst, err)
	}
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 1500)
	for {
		_ = c.SetReadDeadline(deadline)
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return false, nil
			}
			return false, err
		}
		// An echo reply (type 0) to our id, from the address we pinged.
		if n >= 8 && buf[0] == 0 && binary.BigEndian.Uint16(buf[4:]) == id && from.String() == dst {
			return true, nil
		}
	}
}

// Checksum is the Internet checksum (RFC 1071) of b, for ICMP messages and, over a
// pseudo-header and the segment, TCP segments written on raw sockets.
func Checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}
