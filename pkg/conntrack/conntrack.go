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

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Cleaner deletes entries in the conntrack table of one network namespace.
type Cleaner struct {
	mu  sync.Mutex // one Reconcile at a time on ct: its replies are read in order
	ct  *netlink.Conn
	buf []byte // replies are read into it (see readBuffer)
}

// New returns a cleaner for the current network namespace, or for nsFd when it is
// non-zero (tests).
func New(nsFd int) (*Cleaner, error) {
	ct, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: nsFd})
	if err != nil {
		return nil, fmt.Errorf("conntrack netlink socket: %w", err)
	}
	return &Cleaner{ct: ct}, nil
}

// Close releases the cleaner's netlink socket.
func (c *Cleaner) Close() error {
	return c.ct.Close()
}
