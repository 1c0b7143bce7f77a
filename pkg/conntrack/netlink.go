package conntrack

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// deleteBatch is how many deletes go to the kernel in one sendmsg; their error
// replies (one datagram each, when all fail) must fit in the socket's receive
// buffer.
const deleteBatch = 128

// ioTimeout bounds every wait for the kernel: a reconcile must never stall the sync
// loop.
const ioTimeout = 30 * time.Second

// list returns the entries of one address family and protocol (see scan).
func (c *Cleaner) list(family, proto uint8) (entries []Entry, skipped int, err error) {
	skipped, err = c.scan(family, proto, false, func(e Entry) { entries = append(entries, e) })
	return entries, skipped, err
}

// scan dumps the entries of one address family and protocol (on kernels older than
// 5.8, of every protocol; with unanswered, those without a reply, see dumpRequest) and hands each to fn as it arrives, so that memory does
// not grow with the table. Entries that do not decode are skipped (counted in
// skipped): what cannot be understood is not deleted. A dump that the kernel marks
// interrupted (the table changed under it) may miss or repeat entries; the next
// reconcile sees them.
func (c *Cleaner) scan(family, proto uint8, unanswered bool, fn func(Entry)) (skipped int, err error) {
	req, err := dumpRequest(family, proto, unanswered)
	if err != nil {
		return 0, err
	}
	// Whatever an earlier failure left unread would be taken for the dump's replies.
	_, _ = c.drainErrors()
	if err := c.ct.SetDeadline(time.Now().Add(ioTimeout)); err != nil {
		return 0, fmt.Errorf("conntrack dump: %w", err)
	}
	err = nlkit.DumpEach(c.ct, req, c.readBuffer(), func(m nlkit.Message) {
		if m.Type != uint16(ctMsgType(0)) { // IPCTNL_MSG_CT_NEW: one entry
			return
		}
		e, err := decodeEntry(m.Data)
		if err != nil {
			skipped++
			return
		}
		fn(e)
	})
	if err != nil {
		return skipped, fmt.Errorf("conntrack dump: %w", err)
	}
	return skipped, nil
}

// delete deletes entries, deleteBatch per sendmsg, and returns how many the kernel
// removed. The deletes ask for no ack: the kernel handles a netlink message to
// ctnetlink inside the sendmsg, so when it returns, the socket already holds one
// error reply per delete that failed and nothing else; reading them without
// waiting tells how many succeeded. An entry already gone (expired, or replaced by
// a newer one with the same tuple) is not an error.
func (c *Cleaner) delete(entries []Entry) (uint, error) {
	var deleted uint
	var errs []error
	buf := make([]byte, 0, deleteBatch*128)
	for len(entries) > 0 {
		n := min(len(entries), deleteBatch)
		batch := entries[:n]
		entries = entries[n:]
		buf = buf[:0]
		sent := 0
		for _, e := range batch {
			b, err := appendDelete(buf, e)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			buf = b
			sent++
		}
		if sent == 0 {
			continue
		}
		if err := c.send(buf); err != nil {
			return deleted, errors.Join(append(errs, fmt.Errorf("conntrack delete: %w", err))...)
		}
		failed, err := c.drainErrors()
		if err != nil {
			return deleted, errors.Join(append(errs, fmt.Errorf("conntrack delete: %w", err))...)
		}
		lost := 0
		for errno, count := range failed {
			lost += count
			if errno != unix.ENOENT {
				errs = append(errs, fmt.Errorf("conntrack delete: %d entries: %w", count, errno))
			}
		}
		deleted += uint(max(sent-lost, 0))
	}
	return deleted, errors.Join(errs...)
}

// send writes netlink messages to the kernel in one sendmsg.
func (c *Cleaner) send(b []byte) error {
	if err := c.ct.SetDeadline(time.Now().Add(ioTimeout)); err != nil {
		return err
	}
	return nlkit.Send(c.ct, b)
}

// readBuffer is the cleaner's one buffer for replies: a dump datagram is at most
// 32 KiB.
func (c *Cleaner) readBuffer() []byte {
	if c.buf == nil {
		c.buf = make([]byte, 64<<10)
	}
	return c.buf
}

// drainErrors reads, without waiting, every reply queued on the socket and counts
// the netlink errors by errno.
func (c *Cleaner) drainErrors() (map[unix.Errno]int, error) {
	failed := map[unix.Errno]int{}
	if err := nlkit.Drain(c.ct, c.readBuffer(), nlkit.CountErrors(failed)); err != nil {
		return nil, err
	}
	return failed, nil
}
