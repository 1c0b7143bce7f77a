// Package sctpprobe sends and recognises SCTP INIT chunks on raw IP sockets. Tests
// use it to prove SCTP Service rules with real packets on kernels that have SCTP
// conntrack and NAT but no SCTP sockets (CONFIG_IP_SCTP unset: socket(AF_INET,
// SOCK_STREAM, IPPROTO_SCTP) fails with EPROTONOSUPPORT, as on the development
// machine). Open the sockets with net.ListenPacket("ip4:sctp", addr) in the right
// network namespace.
package sctpprobe

import (
	"encoding/binary"
	"hash/crc32"
	"net"
	"time"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Init is an SCTP packet (common header and one INIT chunk) from port src to port
// dst whose initiate tag is tag, with its CRC32c: conntrack drops a packet whose
// checksum is wrong.
func Init(src, dst uint16, tag uint32) []byte {
	p := make([]byte, 12+20)
	binary.BigEndian.PutUint16(p[0:], src)
	binary.BigEndian.PutUint16(p[2:], dst)
	// Verification tag 0, as an INIT has; the checksum goes to p[8:12] below.
	p[12] = 1                                    // chunk type INIT
	binary.BigEndian.PutUint16(p[14:], 20)       // chunk length
	binary.BigEndian.PutUint32(p[16:], tag)      // initiate tag
	binary.BigEndian.PutUint32(p[20:], 65536)    // advertised receiver window
	binary.BigEndian.PutUint16(p[24:], 1)        // outbound streams
	binary.BigEndian.PutUint16(p[26:], 1)        // inbound streams
	binary.BigEndian.PutUint32(p[28:], tag+1000) // initial TSN
	// CRC32c over the packet with a zero checksum field, stored little-endian (RFC
	// 9260 appendix A).
	binary.LittleEndian.PutUint32(p[8:], crc32.Checksum(p, castagnoli))
	return p
}

// AwaitInit reads the raw SCTP socket c until an INIT with initiate tag tag
// arrives, and returns the source address and destination port it arrived with;
// ok is false when none came within timeout.
func AwaitInit(c net.PacketConn, tag uint32, timeout time.Duration) (from net.Addr, dport uint16, ok bool) {
	buf := make([]byte, 1500)
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	for {
		n, addr, err := c.ReadFrom(buf)
		if err != nil {
			return nil, 0, false
		}
		if n >= 32 && buf[12] == 1 && binary.BigEndian.Uint32(buf[16:]) == tag {
			return addr, binary.BigEndian.Uint16(buf[2:]), true
		}
	}
}
