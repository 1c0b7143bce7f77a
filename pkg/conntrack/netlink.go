package conntrack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// deleteBatch is how many deletes go to the kernel in one sendmsg; their error
// replies (one datagram each, when all fail) must fit in the socket's receive
// buffer.
const deleteBatch = 128

// ioTimeout bounds every wait for the kernel: a reconcile must never stall the sync
// loop.
const ioTimeout = 10 * time.Second

// list dumps the entries of one address family and protocol (on kernels older than
// 5.8, of every protocol). Entries that do not decode are skipped (counted in
// skipped): what cannot be understood is not deleted.
func (c *Cleaner) list(family, proto uint8) (entries []Entry, skipped int, err error) {
	req, err := dumpRequest(family, proto)
	if err != nil {
		return nil, 0, err
	}
	// Whatever an earlier failure left unread would be taken for the dump's replies.
	_, _ = c.drainErrors()
	if err := c.ct.SetDeadline(time.Now().Add(ioTimeout)); err != nil {
		return nil, 0, fmt.Errorf("conntrack dump: %w", err)
	}
	msgs, err := c.ct.Execute(req)
	if err != nil {
		return nil, 0, fmt.Errorf("conntrack dump: %w", err)
	}
	entries = make([]Entry, 0, len(msgs))
	for _, m := range msgs {
		if m.Header.Type != ctMsgType(0) { // IPCTNL_MSG_CT_NEW: one entry
			continue
		}
		e, err := decodeEntry(m.Data)
		if err != nil {
			skipped++
			continue
		}
		entries = append(entries, e)
	}
	return entries, skipped, nil
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
	msgs := make([]netlink.Message, 0, deleteBatch)
	for len(entries) > 0 {
		n := min(len(entries), deleteBatch)
		batch := entries[:n]
		entries = entries[n:]
		msgs = msgs[:0]
		for _, e := range batch {
			m, err := deleteRequest(e)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			msgs = append(msgs, m)
		}
		if len(msgs) == 0 {
			continue
		}
		if err := c.ct.SetDeadline(time.Now().Add(ioTimeout)); err != nil {
			return deleted, fmt.Errorf("conntrack delete: %w", err)
		}
		if _, err := c.ct.SendMessages(msgs); err != nil {
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
		deleted += uint(max(len(msgs)-lost, 0))
	}
	return deleted, errors.Join(errs...)
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
	buf := make([]byte, 64<<10)
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
