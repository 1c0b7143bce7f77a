// Package conntrack removes connection-tracking entries that would keep sending UDP
// (and SCTP) traffic to endpoints that are gone, or that were never translated at
// all. TCP connections that happened need no help (a dead endpoint resets or times
// out, and the client opens a new connection that the new rules place); a TCP SYN
// nobody answered does: its entry catches the retransmissions and, ports coming
// round, later connections (see ReconcileUnanswered).
package conntrack

import (
	"fmt"
	"sync"

	mdnetlink "github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Cleaner deletes entries in the conntrack table of one network namespace.
type Cleaner struct {
	h *netlink.Handle // tests create entries and time the upstream-style listing with it

	mu  sync.Mutex // one Reconcile at a time on ct: its replies are read in order
	ct  *mdnetlink.Conn
	buf []byte // replies are read into it (see readBuffer)
}

// New returns a cleaner for the current network namespace, or for nsFd when it is
// non-zero (tests).
func New(nsFd int) (*Cleaner, error) {
	var h *netlink.Handle
	var err error
	if nsFd != 0 {
		h, err = netlink.NewHandleAt(netns.NsHandle(nsFd), unix.NETLINK_NETFILTER)
	} else {
		h, err = netlink.NewHandle(unix.NETLINK_NETFILTER)
	}
	if err != nil {
		return nil, fmt.Errorf("conntrack netlink handle: %w", err)
	}
	ct, err := mdnetlink.Dial(unix.NETLINK_NETFILTER, &mdnetlink.Config{NetNS: nsFd})
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("conntrack netlink socket: %w", err)
	}
	return &Cleaner{h: h, ct: ct}, nil
}

// Close releases the cleaner's netlink sockets.
func (c *Cleaner) Close() error {
	c.h.Close()
	return c.ct.Close()
}
