package nft

import (
	"math/rand/v2"

	"github.com/mdlayher/netlink"

	"github.com/svcproxy/svcproxy/internal/nlkit"
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

// send encodes msgs (nlkit.AppendMessages) and sends them in one sendmsg on conn. n.mu
// is held.
func (n *Netlink) send(conn *netlink.Conn, msgs []netlink.Message) error {
	if n.seq == 0 {
		n.seq = rand.Uint32() | 1 // as the netlink package: unlikely to match another socket's
	}
	buf := nlkit.AppendMessages(n.sendBuf[:0], msgs, &n.seq)
	if cap(buf) <= keptSendBuf {
		n.sendBuf = buf
	} else {
		n.sendBuf = nil
	}
	return nlkit.Send(conn, buf)
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
