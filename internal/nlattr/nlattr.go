// Package nlattr holds the few netlink helpers that every decoder of nf_tables
// messages in svcproxy needs: attribute decoders in the byte order nf_tables
// uses, names read as the kernel reads them, and socket buffers sized for big
// dumps and batches.
package nlattr

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
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

// RaiseBuffers sets c's send and receive buffers to size bytes, past the
// system limits (SO_*BUFFORCE needs CAP_NET_ADMIN).
func RaiseBuffers(c *netlink.Conn, size int) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, size); e != nil {
			serr = e
			return
		}
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, size)
	})
	if err != nil {
		return err
	}
	return serr
}
