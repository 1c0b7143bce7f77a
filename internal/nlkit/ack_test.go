package nlkit

import (
	"encoding/binary"
	"syscall"
	"testing"

	"github.com/svcproxy/svcproxy/internal/nlkit/nlkittest"
)

var ackBytes = nlkittest.AckBytes

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
