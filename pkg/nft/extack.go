package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"github.com/svcproxy/svcproxy/internal/nlattr"
)

// Netlink reply decoding for sendBatch: the kernel's acknowledgements and errors,
// with their extended-ack TLVs (include/uapi/linux/netlink.h). The bytes come from
// outside, so every length is checked before it is used.

const (
	nlmsgHdrLen = 16
	nlmsgError  = 2 // NLMSG_ERROR
	nlmCapped   = 0x100
	nlmAckTLVs  = 0x200

	nlmsgerrAttrMsg      = 1 // NLMSGERR_ATTR_MSG: string
	nlmsgerrAttrOffs     = 2 // NLMSGERR_ATTR_OFFS: u32, offset of the bad attribute in the request
	nlmsgerrAttrMissType = 5 // NLMSGERR_ATTR_MISS_TYPE: u32, type of a missing attribute
)

// replyMsg is one netlink message of a reply datagram.
type replyMsg struct {
	Type  uint16
	Flags uint16
	Seq   uint32
	Data  []byte
}

// splitReplies splits a datagram into messages (host byte order headers, 4-byte
// aligned). A truncated or malformed tail is an error; the messages before it are
// returned too.
func splitReplies(b []byte) ([]replyMsg, error) {
	var out []replyMsg
	for len(b) > 0 {
		if len(b) < nlmsgHdrLen {
			return out, fmt.Errorf("netlink reply: %d trailing bytes", len(b))
		}
		n := int(binary.NativeEndian.Uint32(b[0:4]))
		if n < nlmsgHdrLen || n > len(b) {
			return out, fmt.Errorf("netlink reply: message length %d outside 16..%d", n, len(b))
		}
		out = append(out, replyMsg{
			Type:  binary.NativeEndian.Uint16(b[4:6]),
			Flags: binary.NativeEndian.Uint16(b[6:8]),
			Seq:   binary.NativeEndian.Uint32(b[8:12]),
			Data:  b[nlmsgHdrLen:n],
		})
		aligned := (n + 3) &^ 3
		if aligned > len(b) {
			aligned = len(b)
		}
		b = b[aligned:]
	}
	return out, nil
}

// ackError is a decoded NLMSG_ERROR: Errno 0 is an acknowledgement.
type ackError struct {
	Errno syscall.Errno
	// Seq is the sequence number of the request it answers.
	Seq uint32
	// Msg is the kernel's extended-ack text, if any.
	Msg string
	// Offset is the byte offset, from the start of the request's header, of the
	// attribute the kernel refused; HasOffset tells whether it was given.
	Offset    uint32
	HasOffset bool
	// MissType is the type of an attribute the kernel wanted and did not get.
	MissType    uint32
	HasMissType bool
}

// parseAck decodes the payload of an NLMSG_ERROR message: the error code, the
// request's header (and, unless capped, its payload), then extended-ack TLVs.
func parseAck(m replyMsg) (ackError, error) {
	var a ackError
	if m.Type != nlmsgError {
		return a, fmt.Errorf("netlink reply type %d is not an error message", m.Type)
	}
	d := m.Data
	if len(d) < 4+nlmsgHdrLen {
		return a, fmt.Errorf("netlink error message of %d bytes is short", len(d))
	}
	code := int32(binary.NativeEndian.Uint32(d[0:4]))
	if code > 0 || code < -4095 {
		return a, fmt.Errorf("netlink error code %d out of range", code)
	}
	a.Errno = syscall.Errno(-code)
	reqLen := binary.NativeEndian.Uint32(d[4:8])
	a.Seq = binary.NativeEndian.Uint32(d[12:16])
	rest := d[4+nlmsgHdrLen:]
	if m.Flags&nlmCapped == 0 {
		// The request's payload is echoed after its header.
		if reqLen < nlmsgHdrLen {
			return a, fmt.Errorf("netlink error echoes a request of length %d", reqLen)
		}
		p := uint64(reqLen-nlmsgHdrLen+3) &^ 3
		if p > uint64(len(rest)) {
			p = uint64(len(rest))
		}
		rest = rest[p:]
	}
	if m.Flags&nlmAckTLVs == 0 {
		return a, nil
	}
	err := walkAttrs(rest, func(typ uint16, _ int, v []byte) {
		switch typ {
		case nlmsgerrAttrMsg:
			a.Msg = nlattr.CString(v)
		case nlmsgerrAttrOffs:
			if len(v) >= 4 {
				a.Offset, a.HasOffset = binary.NativeEndian.Uint32(v), true
			}
		case nlmsgerrAttrMissType:
			if len(v) >= 4 {
				a.MissType, a.HasMissType = binary.NativeEndian.Uint32(v), true
			}
		}
	})
	return a, err
}

var errShortAttr = errors.New("netlink attribute runs past the end")

// walkAttrs calls fn for each attribute of a netlink attribute stream: its type
// without the nested/byte-order flags, the offset of its header in b, its value.
func walkAttrs(b []byte, fn func(typ uint16, off int, v []byte)) error {
	off := 0
	for len(b) >= 4 {
		n := int(binary.NativeEndian.Uint16(b[0:2]))
		if n < 4 || n > len(b) {
			return errShortAttr
		}
		fn(binary.NativeEndian.Uint16(b[2:4])&0x3fff, off, b[4:n])
		aligned := (n + 3) &^ 3
		if aligned > len(b) {
			aligned = len(b)
		}
		b, off = b[aligned:], off+aligned
	}
	return nil
}
