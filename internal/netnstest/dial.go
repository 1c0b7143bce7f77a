package netnstest

import (
	"context"
	"net"
	"testing"
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

// ListenAndClose listens inside the namespace and accepts every connection,
// closing it at once, until the test ends: a port that completes handshakes.
func (ns *NS) ListenAndClose(t testing.TB, network, addr string) {
	t.Helper()
	l, err := ns.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}
