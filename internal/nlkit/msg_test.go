package nlkit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/netlink"
)

// message is one message as the kernel writes it: nlmsg_len without the
// padding that follows.
func message(t *testing.T, typ netlink.HeaderType, flags netlink.HeaderFlags, seq uint32, data []byte) []byte {
	t.Helper()
	ne := binary.NativeEndian
	b := ne.AppendUint32(nil, uint32(HdrLen+len(data)))
	b = ne.AppendUint16(b, uint16(typ))
	b = ne.AppendUint16(b, uint16(flags))
	b = ne.AppendUint32(b, seq)
	b = ne.AppendUint32(b, 7)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func TestMsgs(t *testing.T) {
	one := message(t, 0x100, netlink.Multi, 5, []byte{1, 2, 3})
	two := message(t, Done, netlink.Multi, 5, []byte{0, 0, 0, 0})
	both := append(append([]byte(nil), one...), two...)
	for _, tc := range []struct {
		name string
		in   []byte
		want []Message
		err  error
	}{
		{name: "empty"},
		{name: "two", in: both, want: []Message{
			{Type: 0x100, Flags: uint16(netlink.Multi), Seq: 5, PID: 7, Data: []byte{1, 2, 3}},
			{Type: Done, Flags: uint16(netlink.Multi), Seq: 5, PID: 7, Data: []byte{0, 0, 0, 0}},
		}},
		{name: "last unpadded", in: one[:HdrLen+3], want: []Message{
			{Type: 0x100, Flags: uint16(netlink.Multi), Seq: 5, PID: 7, Data: []byte{1, 2, 3}},
		}},
		{name: "trailing bytes", in: append(append([]byte(nil), two...), 1, 2, 3), want: []Message{
			{Type: Done, Flags: uint16(netlink.Multi), Seq: 5, PID: 7, Data: []byte{0, 0, 0, 0}},
		}, err: ErrTrailing},
		{name: "length past the end", in: append(append([]byte(nil), two...), one[:HdrLen+2]...), want: []Message{
			{Type: Done, Flags: uint16(netlink.Multi), Seq: 5, PID: 7, Data: []byte{0, 0, 0, 0}},
		}, err: ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Split(tc.in)
			if !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Errorf("err = %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestAppendMessagesAsTheNetlinkPackage(t *testing.T) {
	msgs := []netlink.Message{
		{Header: netlink.Header{Type: 0x10, Flags: netlink.Request}, Data: []byte{1, 2, 3}}, // unpadded
		{Header: netlink.Header{Type: 0xa0c, Flags: netlink.Request | netlink.Acknowledge, PID: 9}, Data: AppendStringAttr(NfGenMsg(2), 1, "t")},
		{Header: netlink.Header{Type: 0x11, Flags: netlink.Request, Sequence: 100}}, // a sequence already set stays
	}
	seq := uint32(41)
	got := AppendMessages([]byte("prefix"), msgs, &seq)
	want := []byte("prefix")
	for i, m := range msgs {
		if m.Header.Length == 0 || m.Header.Sequence == 0 {
			t.Fatalf("message %d: header %+v, want a length and a sequence", i, m.Header)
		}
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, b...)
	}
	if msgs[0].Header.Sequence != 42 || msgs[1].Header.Sequence != 43 || msgs[2].Header.Sequence != 100 || seq != 43 {
		t.Fatalf("sequences %d %d %d, next %d", msgs[0].Header.Sequence, msgs[1].Header.Sequence, msgs[2].Header.Sequence, seq)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got\n% x\nwant\n% x", got, want)
	}
}

func TestAppendHeader(t *testing.T) {
	b := []byte{0xaa}
	b, start := AppendHeader(b, 0x102, netlink.Request, 3, 0)
	b = append(b, NfGenMsg(2)...)
	b = AppendAttr(b, 1, []byte{5})
	SetLength(b, start)
	if diff := cmp.Diff(message(t, 0x102, netlink.Request, 3, append(NfGenMsg(2), AppendAttr(nil, 1, []byte{5})...))[:12], b[1:13]); diff != "" {
		t.Fatalf("header (-netlink +nlkit):\n%s", diff)
	}
}

func TestErrorCode(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    []byte
		errno syscall.Errno
		ok    bool
	}{
		{"short", []byte{1, 2, 3}, 0, false},
		{"ack", errPayload(0), 0, true},
		{"ENOENT", errPayload(-int32(syscall.ENOENT)), syscall.ENOENT, true},
		{"positive is no error", errPayload(5), 0, true},
	} {
		errno, ok := ErrorCode(tc.in)
		if errno != tc.errno || ok != tc.ok {
			t.Errorf("%s: ErrorCode = %v, %v, want %v, %v", tc.name, errno, ok, tc.errno, tc.ok)
		}
	}
}

func errPayload(code int32) []byte {
	b := make([]byte, 4+HdrLen)
	nativeEndianPutInt32(b, code)
	return b
}

func TestCountErrors(t *testing.T) {
	failed := map[syscall.Errno]int{}
	count := CountErrors(failed)
	for _, m := range []Message{
		{Type: Error, Data: errPayload(-int32(syscall.ENOENT))},
		{Type: Error, Data: errPayload(-int32(syscall.ENOENT))},
		{Type: Error, Data: errPayload(-int32(syscall.EBUSY))},
		{Type: Error, Data: errPayload(0)},                      // an ack
		{Type: Error, Data: []byte{1}},                          // too short
		{Type: 0x100, Data: errPayload(-int32(syscall.ENOENT))}, // not an error
	} {
		count(m)
	}
	if diff := cmp.Diff(map[syscall.Errno]int{syscall.ENOENT: 2, syscall.EBUSY: 1}, failed); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func nativeEndianPutInt32(b []byte, v int32) {
	// As the kernel writes nlmsgerr.error: host byte order.
	binary.NativeEndian.PutUint32(b, uint32(v))
}
