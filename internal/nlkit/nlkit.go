// Package nlkit is svcproxy's one netlink toolkit, shared by pkg/nft,
// pkg/takeover and pkg/conntrack: attribute decoders in the byte order
// nf_tables uses and an allocation-free attribute walker (attr.go), attribute
// and message encoders that append to one buffer (attr.go, msg.go), datagram
// splitting and acknowledgement decoding with extended-ack TLVs (msg.go), dump
// requests and the read-until-done loop (dump.go), and the socket code: raised
// buffers, one sendmsg, one recvmsg (sock.go). Everything that reads bytes from
// the kernel is bounds-checked and never panics.
package nlkit

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"
)

// Msg decodes the attributes of an nfnetlink message, after its 4-byte
// nfgenmsg header.
func Msg(data []byte) (*netlink.AttributeDecoder, error) {
	if len(data) < 4 {
		return nil, fmt.Errorf("message of %d bytes has no nfgenmsg header", len(data))
	}
	ad, err := netlink.NewAttributeDecoder(data[4:])
	if err != nil {
		return nil, fmt.Errorf("decode attributes: %w", err)
	}
	ad.ByteOrder = binary.BigEndian
	return ad, nil
}

// Genl decodes the attributes of a generic netlink message, after its 4-byte
// genlmsghdr, in host byte order (as generic netlink families such as IPVS
// write them).
func Genl(data []byte) (*netlink.AttributeDecoder, error) {
	if len(data) < 4 {
		return nil, fmt.Errorf("message of %d bytes has no genlmsghdr", len(data))
	}
	ad, err := netlink.NewAttributeDecoder(data[4:])
	if err != nil {
		return nil, fmt.Errorf("decode attributes: %w", err)
	}
	return ad, nil
}

// Nested decodes the attributes nested in b.
func Nested(b []byte) (*netlink.AttributeDecoder, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, fmt.Errorf("decode nested attributes: %w", err)
	}
	ad.ByteOrder = binary.BigEndian
	return ad, nil
}

// CString reads a name as the kernel does: up to its first NUL.
func CString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
