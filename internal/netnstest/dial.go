package netnstest

import (
	"context"
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
	d := net.Dialer{Timeout: timeout}
	if local != "" {
		var err error
		switch network {
		case "udp", "udp4":
			d.LocalAddr, err = net.ResolveUDPAddr(network, local)
		default:
			d.LocalAddr, err = net.ResolveTCPAddr(network, local)
		}
		if err != nil {
			return nil, err
		}
	}
	return netns.Dialer(ns.Name, d)(context.Background(), network, addr)
}

// Listen opens a listener inside the namespace.
func (ns *NS) Listen(network, addr string) (net.Listener, error) {
	return netns.Listen(ns.Name, network, addr)
}

// Path is the namespace's bind mount.
func (ns *NS) Path() string { return netns.Path(ns.Name) }
