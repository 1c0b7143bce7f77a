package nlkit

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Dump asks nf_tables for a dump (NLM_F_DUMP) of msgType (NFT_MSG_GET*) in
// family, filtered by attrs, and returns the messages of that family (those
// with an nfgenmsg header), as the netlink package collects a multipart
// answer: all of it in memory.
func Dump(c *netlink.Conn, msgType int, family uint8, attrs []netlink.Attribute) ([]netlink.Message, error) {
	data, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		return nil, err
	}
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: NftType(msgType), Flags: netlink.Request | netlink.Dump},
		Data:   append(NfGenMsg(family), data...),
	})
	if err != nil {
		return nil, err
	}
	out := msgs[:0]
	for _, m := range msgs {
		if len(m.Data) >= 4 && m.Data[0] == family {
			out = append(out, m)
		}
	}
	return out, nil
}

// DumpEach sends req, a dump request, on c and hands each message of the
// answer to fn as it arrives, read into buf one datagram at a time, so that
// memory does not grow with the dump; it returns at NLMSG_DONE, or at an
// NLMSG_ERROR (its errno, if any). Replies to other requests (other sequence
// numbers) are skipped. The caller sets c's deadline.
func DumpEach(c *netlink.Conn, req netlink.Message, buf []byte, fn func(Message)) error {
	sent, err := c.Send(req)
	if err != nil {
		return err
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	for {
		n, err := Recv(raw, buf, true)
		if err != nil {
			return err
		}
		m := Msgs{B: buf[:n]}
		for m.Next() {
			if m.Msg.Seq != sent.Header.Sequence {
				continue // a late reply to something else
			}
			switch m.Msg.Type {
			case Done:
				return nil
			case Error:
				if errno, _ := ErrorCode(m.Msg.Data); errno != 0 {
					return errno
				}
				return nil
			default:
				fn(m.Msg)
			}
		}
		if m.Err != nil && !errors.Is(m.Err, ErrTrailing) {
			return m.Err
		}
	}
}

// Drain reads, without waiting, every datagram queued on c and hands each
// message to fn: the error replies a batch sent without acknowledgements left,
// or what an earlier failure left unread.
func Drain(c *netlink.Conn, buf []byte, fn func(Message)) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	for {
		n, err := Recv(raw, buf, false)
		if err == unix.EAGAIN {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read replies: %w", err) // ENOBUFS: replies were lost
		}
		m := Msgs{B: buf[:n]}
		for m.Next() {
			fn(m.Msg)
		}
		if m.Err != nil && !errors.Is(m.Err, ErrTrailing) {
			return fmt.Errorf("parse replies: %w", m.Err)
		}
	}
}

// CountErrors returns a Drain callback that adds the errno of every failed
// NLMSG_ERROR to failed.
func CountErrors(failed map[syscall.Errno]int) func(Message) {
	return func(m Message) {
		if m.Type != Error {
			return
		}
		if errno, _ := ErrorCode(m.Data); errno != 0 {
			failed[errno]++
		}
	}
}
