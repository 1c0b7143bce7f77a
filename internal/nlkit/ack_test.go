package nlkit

import (
	"encoding/binary"
	"syscall"
	"testing"
)

// ackBytes builds an NLMSG_ERROR datagram as the kernel sends it: a capped ack of
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
		attr(attrMsg, append([]byte(msg), 0))
	}
	if offs != 0 {
		attr(attrOffs, ne.AppendUint32(nil, offs))
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
	b = ne.AppendUint32(b, uint32(HdrLen+len(payload)))
	b = ne.AppendUint16(b, Error)
	b = ne.AppendUint16(b, flags)
	b = ne.AppendUint32(b, seq)
	b = ne.AppendUint32(b, 0)
	return append(b, payload...)
}

func TestParseAck(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    Ack
		wantErr bool
	}{
		{"ack", ackBytes(0, 7, "", 0, Capped), Ack{Seq: 7}, false},
		{"error with message and offset", ackBytes(syscall.ERANGE, 9, "Attribute failed policy validation", 48, Capped|AckTLVs),
			Ack{Errno: syscall.ERANGE, Seq: 9, Msg: "Attribute failed policy validation", Offset: 48, HasOffset: true}, false},
		{"TLVs present but not flagged are ignored", ackBytes(syscall.ENOENT, 3, "x", 0, Capped),
			Ack{Errno: syscall.ENOENT, Seq: 3}, false},
		{"uncapped: the echoed request (longer than the reply) is skipped safely", ackBytes(syscall.ENOENT, 3, "x", 0, AckTLVs),
			Ack{Errno: syscall.ENOENT, Seq: 3}, false},
		{"short", ackBytes(0, 1, "", 0, Capped)[:HdrLen+10], Ack{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := Split(tc.in)
			if err != nil {
				if tc.wantErr {
					return
				}
				t.Fatalf("split: %v", err)
			}
			if len(msgs) != 1 {
				t.Fatalf("got %d messages", len(msgs))
			}
			got, err := ParseAck(msgs[0])
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSplitRejectsBadLengths(t *testing.T) {
	good := ackBytes(0, 1, "", 0, Capped)
	for _, n := range []uint32{0, 3, 15, uint32(len(good) + 1), 1 << 31} {
		b := append([]byte(nil), good...)
		binary.NativeEndian.PutUint32(b, n)
		if _, err := Split(b); err == nil {
			t.Errorf("length %d accepted", n)
		}
	}
}
