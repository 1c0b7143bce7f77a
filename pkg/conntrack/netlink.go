package conntrack

import (
	"errors"
	"fmt"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// deleteBatch is how many deletes go to the kernel in one sendmsg; their acks
// (one datagram each) must fit in the socket's receive buffer.
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

// delete deletes entries, many per sendmsg, and returns how many the kernel removed.
// An entry already gone (expired, or replaced by a newer one with the same tuple)
// is not an error.
func (c *Cleaner) delete(entries []Entry) (uint, error) {
	var deleted uint
	var errs []error
	for len(entries) > 0 {
		n := min(len(entries), deleteBatch)
		batch := entries[:n]
		entries = entries[n:]
		msgs := make([]netlink.Message, 0, n)
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
		// One ack or error per message, in order, each its own datagram.
		for range msgs {
			_, err := c.ct.Receive()
			switch {
			case err == nil:
				deleted++
			case errors.Is(err, unix.ENOENT):
			case isTimeout(err):
				return deleted, errors.Join(append(errs, fmt.Errorf("conntrack delete: waiting for the kernel: %w", err))...)
			default:
				errs = append(errs, fmt.Errorf("conntrack delete: %w", err))
			}
		}
	}
	return deleted, errors.Join(errs...)
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}
