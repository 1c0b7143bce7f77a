package nlkit

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// RaiseBuffers sets c's send and receive buffers to size bytes, past the
// system limits (SO_*BUFFORCE needs CAP_NET_ADMIN).
func RaiseBuffers(c *netlink.Conn, size int) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, size); e != nil {
			serr = e
			return
		}
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, size)
	})
	if err != nil {
		return err
	}
	return serr
}

// Send writes b, one or more netlink messages, to the kernel in one sendmsg on
// c, waiting while the socket is full (up to c's deadline).
func Send(c *netlink.Conn, b []byte) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	var werr error
	err = raw.Write(func(fd uintptr) bool {
		_, werr = unix.SendmsgN(int(fd), b, nil, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}, 0)
		return werr != unix.EAGAIN && werr != unix.EINTR // full: wait until writable
	})
	return errors.Join(err, werr)
}

// ErrLong is Recv's error for a datagram longer than its buffer: the rest of it
// is lost.
var ErrLong = errors.New("netlink datagram longer than the buffer")

// Recv reads one datagram into buf. With block it waits for one (up to the
// socket's deadline, which the returned error then reports); without, it
// returns unix.EAGAIN when none is queued. A datagram longer than buf is an
// error, not a silently truncated read.
func Recv(raw syscall.RawConn, buf []byte, block bool) (int, error) {
	var n int
	var rerr error
	err := raw.Read(func(fd uintptr) bool {
		for {
			var flags int
			n, _, flags, _, rerr = unix.Recvmsg(int(fd), buf, nil, unix.MSG_DONTWAIT)
			if rerr == unix.EINTR {
				continue
			}
			if rerr == unix.EAGAIN && block {
				return false // wait until readable
			}
			if rerr == nil && flags&unix.MSG_TRUNC != 0 {
				rerr = fmt.Errorf("netlink reply longer than %d bytes: %w", len(buf), ErrLong)
			}
			return true
		}
	})
	if err != nil {
		return 0, err
	}
	return n, rerr
}
