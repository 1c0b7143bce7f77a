package nft

import (
	"encoding/binary"
	"syscall"
	"testing"

	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// ackBytes builds (as internal/nlkit's tests do) an NLMSG_ERROR datagram as the kernel sends it: a capped ack of
// request seq with extended-ack TLVs.
func ackBytes(errno syscall.Errno, seq uint32, msg string, offs uint32, flags uint16) []byte {
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
		attr(1 /* NLMSGERR_ATTR_MSG */, append([]byte(msg), 0))
	}
	if offs != 0 {
		attr(2 /* NLMSGERR_ATTR_OFFS */, ne.AppendUint32(nil, offs))
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
	b = ne.AppendUint32(b, uint32(nlkit.HdrLen+len(payload)))
	b = ne.AppendUint16(b, nlkit.Error)
	b = ne.AppendUint16(b, flags)
	b = ne.AppendUint32(b, seq)
	b = ne.AppendUint32(b, 0)
	return append(b, payload...)
}

// FuzzParseAck feeds arbitrary bytes to the reply decoders, as a hostile or buggy
// kernel might: they must never panic, and what they decode must stay in bounds.
func FuzzParseAck(f *testing.F) {
	f.Add(ackBytes(0, 7, "", 0, nlkit.Capped))
	f.Add(ackBytes(syscall.ERANGE, 9, "Attribute failed policy validation", 48, nlkit.Capped|nlkit.AckTLVs))
	f.Add(ackBytes(syscall.ENOENT, 3, "x", 0, nlkit.AckTLVs))
	f.Add(append(ackBytes(0, 1, "", 0, nlkit.Capped), ackBytes(syscall.EEXIST, 2, "y", 24, nlkit.Capped|nlkit.AckTLVs)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, _ := nlkit.Split(b)
		for _, m := range msgs {
			if len(m.Data) > len(b) {
				t.Fatalf("message data of %d bytes from %d input bytes", len(m.Data), len(b))
			}
			a, err := nlkit.ParseAck(m)
			if err == nil && (a.Errno < 0 || a.Errno > 4095 || len(a.Msg) > len(b)) {
				t.Fatalf("decoded out of range: %+v", a)
			}
			// What a refused message would be described with must not panic either.
			_ = elementKeys(m.Data, 0, a)
		}
	})
}
