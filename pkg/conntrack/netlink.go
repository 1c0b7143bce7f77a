package conntrack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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
	sent, err := c.ct.Send(req)
	if err != nil {
		return 0, fmt.Errorf("conntrack dump: %w", err)
	}
	rc, err := c.ct.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("conntrack dump: %w", err)
	}
	buf := c.readBuffer()
	done := false
	var derr error
	for !done && derr == nil {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
			return rerr != unix.EAGAIN && rerr != unix.EWOULDBLOCK && rerr != unix.EINTR
		}); err != nil {
			return skipped, fmt.Errorf("conntrack dump: %w", err) // the deadline
		}
		if rerr != nil {
			return skipped, fmt.Errorf("conntrack dump: %w", rerr)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return skipped, fmt.Errorf("conntrack dump: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != sent.Header.Sequence {
				continue // a late reply to something else
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				done = true
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if code := int32(binary.NativeEndian.Uint32(m.Data)); code < 0 {
						derr = fmt.Errorf("conntrack dump: %w", unix.Errno(-code))
					}
				}
				done = true
			case uint16(ctMsgType(0)): // IPCTNL_MSG_CT_NEW: one entry
				e, err := decodeEntry(m.Data)
				if err != nil {
					skipped++
					continue
				}
				fn(e)
			}
		}
	}
	return skipped, derr
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
	rc, err := c.ct.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return serr != unix.EAGAIN && serr != unix.EWOULDBLOCK && serr != unix.EINTR
	}); err != nil {
		return err
	}
	return serr
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
	rc, err := c.ct.SyscallConn()
	if err != nil {
		return nil, err
	}
	failed := map[unix.Errno]int{}
	var rerr error
	buf := c.readBuffer()
	err = rc.Read(func(fd uintptr) bool {
		for {
			n, _, err := unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
			if err == unix.EAGAIN || err == unix.EWOULDBLOCK {
				return true
			}
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				rerr = fmt.Errorf("read replies: %w", err) // ENOBUFS: replies were lost
				return true
			}
			if err := countErrors(buf[:n], failed); err != nil {
				rerr = err
				return true
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return failed, rerr
}

// countErrors adds the errno of every NLMSG_ERROR in one datagram to failed.
func countErrors(b []byte, failed map[unix.Errno]int) error {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return fmt.Errorf("parse replies: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Type != unix.NLMSG_ERROR || len(m.Data) < 4 {
			continue
		}
		if code := int32(binary.NativeEndian.Uint32(m.Data)); code < 0 {
			failed[unix.Errno(-code)]++
		}
	}
	return nil
}
