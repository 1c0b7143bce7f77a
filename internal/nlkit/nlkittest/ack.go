// Package nlkittest builds netlink replies as the kernel sends them, for the tests
// of the decoders in internal/nlkit and of their users.
package nlkittest

import (
	"encoding/binary"
	"syscall"

	"golang.org/x/sys/unix"
)

// AckBytes builds an NLMSG_ERROR datagram as the kernel sends it: an ack of request
// seq (errno 0) or its refusal, with the extended-ack message and offset as TLVs
// when given, and header flags (NLM_F_CAPPED, NLM_F_ACK_TLVS).
func AckBytes(errno syscall.Errno, seq uint32, msg string, offs uint32, flags uint16) []byte {
	ne := binary.NativeEndian
	var tlvs []byte
	attr := func(typ uint16, v []byte) {
		tlvs = ne.AppendUint16(tlvs, uint16(4+len(v)))
		tlvs = ne.AppendUint16(tlvs, typ)
		tlvs = append(tlvs, v...)
		for len(tlvs)%4 != 0 {
			tlvs = append(tlvs, 0)
		}
	}
	if msg != "" {
		attr(unix.NLMSGERR_ATTR_MSG, append([]byte(msg), 0))
	}
	if offs != 0 {
		attr(unix.NLMSGERR_ATTR_OFFS, ne.AppendUint32(nil, offs))
	}
	var payload []byte
	payload = ne.AppendUint32(payload, uint32(-int32(errno)))
	// The request's header: length 100, type NEWSETELEM, seq.
	payload = ne.AppendUint32(payload, 100)
	payload = ne.AppendUint16(payload, 0xa0c)
	payload = ne.AppendUint16(payload, 5)
	payload = ne.AppendUint32(payload, seq)
	payload = ne.AppendUint32(payload, 0)
	payload = append(payload, tlvs...)
	var b []byte
	b = ne.AppendUint32(b, uint32(unix.NLMSG_HDRLEN+len(payload)))
	b = ne.AppendUint16(b, unix.NLMSG_ERROR)
	b = ne.AppendUint16(b, flags)
	b = ne.AppendUint32(b, seq)
	b = ne.AppendUint32(b, 0)
	return append(b, payload...)
}
