package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// A batch is encoded into one buffer, sized once, and sent with one sendmsg.
// The netlink package marshals each message into a buffer of its own and
// appends them all to one grown by doubling: ~90 MB of garbage in a 30k cold
// sync, for batches of ~1 MB.

// keptSendBuf is the largest send buffer kept for the next transaction; a cold
// sync's batches (~1-2 MB each) reuse one, and the process does not keep a
// mass update's forever.
const keptSendBuf = 4 << 20

// replyBufSize bounds one datagram of the kernel's replies to a batch: each
// is one message's acknowledgement, capped (without the message it answers)
// or not (a message stays under 64 KiB: elementsPerMessage).
const replyBufSize = 128 << 10

// send encodes msgs (encodeBatch) and sends them in one sendmsg on conn. n.mu
// is held.
func (n *Netlink) send(conn *netlink.Conn, msgs []netlink.Message) error {
	if n.seq == 0 {
		n.seq = rand.Uint32() | 1 // as the netlink package: unlikely to match another socket's
	}
	buf := encodeBatch(n.sendBuf[:0], msgs, &n.seq)
	if cap(buf) <= keptSendBuf {
		n.sendBuf = buf
	} else {
		n.sendBuf = nil
	}
	raw, err := conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	var werr error
	err = raw.Write(func(fd uintptr) bool {
		_, werr = unix.SendmsgN(int(fd), buf, nil, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}, 0)
		return !errors.Is(werr, unix.EAGAIN) // full: wait until writable
	})
	return errors.Join(err, werr)
}

// encodeBatch appends msgs to dst (grown once) as the netlink package marshals
// them, setting each header's length and next sequence number (after *seq)
// where they are zero; their port ID stays as given (0: the kernel's).
func encodeBatch(dst []byte, msgs []netlink.Message, seq *uint32) []byte {
	size := 0
	for _, m := range msgs {
		size += nlmsgAlign(unix.NLMSG_HDRLEN + len(m.Data))
	}
	if cap(dst)-len(dst) < size {
		dst = append(make([]byte, 0, len(dst)+size), dst...)
	}
	for i := range msgs {
		h := &msgs[i].Header
		if h.Length == 0 {
			h.Length = uint32(nlmsgAlign(unix.NLMSG_HDRLEN + len(msgs[i].Data)))
		}
		if h.Sequence == 0 {
			*seq++
			h.Sequence = *seq
		}
		start := len(dst)
		dst = binary.NativeEndian.AppendUint32(dst, h.Length)
		dst = binary.NativeEndian.AppendUint16(dst, uint16(h.Type))
		dst = binary.NativeEndian.AppendUint16(dst, uint16(h.Flags))
		dst = binary.NativeEndian.AppendUint32(dst, h.Sequence)
		dst = binary.NativeEndian.AppendUint32(dst, h.PID)
		dst = append(dst, msgs[i].Data...)
		for len(dst)-start < int(h.Length) {
			dst = append(dst, 0)
		}
	}
	return dst
}

// ReleaseBuffers drops the buffers kept between transactions: after a big
// sync they would hold its largest batch (1-2 MB at 30k Services) for the life
// of the process.
func (n *Netlink) ReleaseBuffers() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sendBuf, n.replyBuf = nil, nil
}

// reply is the buffer the kernel's replies are read into. n.mu is held.
func (n *Netlink) reply() []byte {
	if n.replyBuf == nil {
		n.replyBuf = make([]byte, replyBufSize)
	}
	return n.replyBuf
}

func nlmsgAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }
