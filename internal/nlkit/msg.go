package nlkit

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Netlink message framing (include/uapi/linux/netlink.h): a 16-byte header in
// host byte order, then the payload, each message padded to 4 bytes.

const (
	// HdrLen is the length of a netlink message header (NLMSG_HDRLEN).
	HdrLen = 16
	// Error is the type of an error or acknowledgement message (NLMSG_ERROR).
	Error = 2
	// Done ends a multipart dump (NLMSG_DONE).
	Done = 3

	// Capped and AckTLVs are NLM_F_CAPPED and NLM_F_ACK_TLVS, flags of an
	// NLMSG_ERROR: the request's payload is not echoed; extended-ack TLVs follow.
	Capped  = 0x100
	AckTLVs = 0x200

	attrMsg      = 1 // NLMSGERR_ATTR_MSG: string
	attrOffs     = 2 // NLMSGERR_ATTR_OFFS: u32, offset of the bad attribute in the request
	attrMissType = 5 // NLMSGERR_ATTR_MISS_TYPE: u32, type of a missing attribute
)

// Align rounds n up to the 4-byte alignment of netlink messages.
func Align(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

// NfGenMsg is the nfgenmsg header that starts every nfnetlink message's
// payload: family, version 0, resource id 0.
func NfGenMsg(family uint8) []byte { return []byte{family, unix.NFNETLINK_V0, 0, 0} }

// NftType is the message type of nf_tables message msg (NFT_MSG_*).
func NftType(msg int) netlink.HeaderType {
	return netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | msg)
}

// AppendHeader appends a message header of length 0 (SetLength writes it once
// the payload is appended) and returns b and where the message starts.
func AppendHeader(b []byte, typ netlink.HeaderType, flags netlink.HeaderFlags, seq, pid uint32) ([]byte, int) {
	start := len(b)
	ne := binary.NativeEndian
	b = ne.AppendUint32(b, 0)
	b = ne.AppendUint16(b, uint16(typ))
	b = ne.AppendUint16(b, uint16(flags))
	b = ne.AppendUint32(b, seq)
	b = ne.AppendUint32(b, pid)
	return b, start
}

// SetLength writes the length of the message that starts at start and runs to
// the end of b.
func SetLength(b []byte, start int) {
	binary.NativeEndian.PutUint32(b[start:], uint32(len(b)-start))
}

// AppendMessages appends msgs to dst (grown once) as the netlink package
// marshals them, setting each header's length and next sequence number (after
// *seq) where they are zero; their port ID stays as given (0: the kernel's).
func AppendMessages(dst []byte, msgs []netlink.Message, seq *uint32) []byte {
	size := 0
	for _, m := range msgs {
		size += Align(HdrLen + len(m.Data))
	}
	if cap(dst)-len(dst) < size {
		dst = append(make([]byte, 0, len(dst)+size), dst...)
	}
	for i := range msgs {
		h := &msgs[i].Header
		if h.Length == 0 {
			h.Length = uint32(Align(HdrLen + len(msgs[i].Data)))
		}
		if h.Sequence == 0 {
			*seq++
			h.Sequence = *seq
		}
		var start int
		dst, start = AppendHeader(dst, h.Type, h.Flags, h.Sequence, h.PID)
		binary.NativeEndian.PutUint32(dst[start:], h.Length)
		dst = append(dst, msgs[i].Data...)
		for len(dst)-start < int(h.Length) {
			dst = append(dst, 0)
		}
	}
	return dst
}

// Message is one netlink message of a received datagram; Data aliases it.
type Message struct {
	Type  uint16
	Flags uint16
	Seq   uint32
	PID   uint32
	Data  []byte
}

// Msgs walks the messages of a datagram without allocating, as Attrs walks
// attributes: Err is set at a message whose length is under a header's or past
// the end (ErrTruncated) and at 1-15 trailing bytes (ErrTrailing).
type Msgs struct {
	B   []byte
	Msg Message
	Err error
}

// Next advances to the next message; false at the end or on an error.
func (m *Msgs) Next() bool {
	if len(m.B) < HdrLen {
		if len(m.B) != 0 {
			m.Err = msgError{fmt.Sprintf("netlink reply: %d trailing bytes", len(m.B)), ErrTrailing}
		}
		return false
	}
	ne := binary.NativeEndian
	n := int(ne.Uint32(m.B[0:4]))
	if n < HdrLen || n > len(m.B) {
		m.Err = msgError{fmt.Sprintf("netlink reply: message length %d outside 16..%d", n, len(m.B)), ErrTruncated}
		return false
	}
	m.Msg = Message{
		Type:  ne.Uint16(m.B[4:6]),
		Flags: ne.Uint16(m.B[6:8]),
		Seq:   ne.Uint32(m.B[8:12]),
		PID:   ne.Uint32(m.B[12:16]),
		Data:  m.B[HdrLen:n],
	}
	m.B = m.B[min(Align(n), len(m.B)):]
	return true
}

// msgError is a framing error that says where, and is (errors.Is) ErrTrailing
// or ErrTruncated.
type msgError struct {
	text string
	is   error
}

func (e msgError) Error() string        { return e.text }
func (e msgError) Is(target error) bool { return target == e.is }

// Split splits a datagram into messages. A truncated or malformed tail is an
// error; the messages before it are returned too.
func Split(b []byte) ([]Message, error) {
	var out []Message
	m := Msgs{B: b}
	for m.Next() {
		out = append(out, m.Msg)
	}
	return out, m.Err
}

// ErrorCode returns the errno of an NLMSG_ERROR payload, 0 for an
// acknowledgement; ok is false when the payload is too short to hold one.
func ErrorCode(data []byte) (errno syscall.Errno, ok bool) {
	if len(data) < 4 {
		return 0, false
	}
	if code := int32(binary.NativeEndian.Uint32(data)); code < 0 {
		return syscall.Errno(-code), true
	}
	return 0, true
}

// Ack is a decoded NLMSG_ERROR: Errno 0 is an acknowledgement.
type Ack struct {
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

// ParseAck decodes the payload of an NLMSG_ERROR message: the error code, the
// request's header (and, unless capped, its payload), then extended-ack TLVs.
func ParseAck(m Message) (Ack, error) {
	var a Ack
	if m.Type != Error {
		return a, fmt.Errorf("netlink reply type %d is not an error message", m.Type)
	}
	d := m.Data
	if len(d) < 4+HdrLen {
		return a, fmt.Errorf("netlink error message of %d bytes is short", len(d))
	}
	code := int32(binary.NativeEndian.Uint32(d[0:4]))
	if code > 0 || code < -4095 {
		return a, fmt.Errorf("netlink error code %d out of range", code)
	}
	a.Errno = syscall.Errno(-code)
	reqLen := binary.NativeEndian.Uint32(d[4:8])
	a.Seq = binary.NativeEndian.Uint32(d[12:16])
	rest := d[4+HdrLen:]
	if m.Flags&Capped == 0 {
		// The request's payload is echoed after its header.
		if reqLen < HdrLen {
			return a, fmt.Errorf("netlink error echoes a request of length %d", reqLen)
		}
		p := uint64(reqLen-HdrLen+3) &^ 3
		if p > uint64(len(rest)) {
			p = uint64(len(rest))
		}
		rest = rest[p:]
	}
	if m.Flags&AckTLVs == 0 {
		return a, nil
	}
	err := WalkAttrs(rest, func(typ uint16, _ int, v []byte) {
		switch typ {
		case attrMsg:
			a.Msg = CString(v)
		case attrOffs:
			if len(v) >= 4 {
				a.Offset, a.HasOffset = binary.NativeEndian.Uint32(v), true
			}
		case attrMissType:
			if len(v) >= 4 {
				a.MissType, a.HasMissType = binary.NativeEndian.Uint32(v), true
			}
		}
	})
	return a, err
}
