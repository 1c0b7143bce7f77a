// Package conntrack removes connection-tracking entries that would keep sending UDP
// (and SCTP) traffic to endpoints that are gone, or that were never translated at
// all. (TCP needs no help: a dead endpoint resets or times out, and the client opens
// a new connection that the new rules place.)
package conntrack

import (
	"fmt"
	"net"
	"net/netip"
	"sync"

	mdnetlink "github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Cleaner deletes entries in the conntrack table of one network namespace.
type Cleaner struct {
	h *netlink.Handle

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

// ClearUDP deletes UDP entries for connections to service (ClusterIP:port) that were
// translated to endpoint. It returns how many were deleted.
func (c *Cleaner) ClearUDP(service netip.AddrPort, endpoint netip.Addr) (uint, error) {
	f := &netlink.ConntrackFilter{}
	if err := f.AddProtocol(unix.IPPROTO_UDP); err != nil {
		return 0, err
	}
	if err := f.AddIP(netlink.ConntrackOrigDstIP, net.IP(service.Addr().AsSlice())); err != nil {
		return 0, err
	}
	if err := f.AddPort(netlink.ConntrackOrigDstPort, service.Port()); err != nil {
		return 0, err
	}
	if err := f.AddIP(netlink.ConntrackReplySrcIP, net.IP(endpoint.AsSlice())); err != nil {
		return 0, err
	}
	family := netlink.InetFamily(unix.AF_INET)
	if service.Addr().Is6() {
		family = unix.AF_INET6
	}
	n, err := c.h.ConntrackDeleteFilters(netlink.ConntrackTable, family, f)
	if err != nil {
		return n, fmt.Errorf("delete udp conntrack %s -> %s: %w", service, endpoint, err)
	}
	return n, nil
}
