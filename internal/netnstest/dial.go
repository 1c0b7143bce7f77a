package netnstest

import (
	"net"
	"time"

	"github.com/svcproxy/svcproxy/internal/netns"
)

// Dial opens a connection from inside the namespace; the conn can be used from any
// goroutine (see internal/netns).
func (ns *NS) Dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	return ns.DialFrom(network, "", addr, timeout)
}

// DialFrom is Dial with a fixed local address (e.g. ":40000" for a UDP flow that
// must keep its source port).
func (ns *NS) DialFrom(network, local, addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := netns.Do(ns.Path(), func() error {
		d := net.Dialer{Timeout: timeout}
		var err error
		if local != "" {
			switch network {
			case "udp", "udp4":
				d.LocalAddr, err = net.ResolveUDPAddr(network, local)
			default:
				d.LocalAddr, err = net.ResolveTCPAddr(network, local)
			}
			if err != nil {
				return err
			}
		}
		c, err = d.Dial(network, addr)
		return err
	})
	return c, err
}

// Listen opens a listener inside the namespace.
func (ns *NS) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := netns.Do(ns.Path(), func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// Path is the namespace's bind mount.
func (ns *NS) Path() string { return "/run/netns/" + ns.Name }
