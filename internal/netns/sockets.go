package netns

import (
	"context"
	"net"
	"time"
)

// Dialer returns a dial function whose sockets live in the named namespace;
// d sets the timeout, local address and so on.
func Dialer(name string, d net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		var derr error
		if err := Do(Path(name), func() error { c, derr = d.DialContext(ctx, network, addr); return nil }); err != nil {
			return nil, err
		}
		return c, derr
	}
}

// DialFunc is Dialer with only a timeout, the shape client-go's rest.Config.Dial
// and http.Transport.DialContext want.
func DialFunc(name string, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return Dialer(name, net.Dialer{Timeout: timeout})
}

// Listen opens a stream listener inside the named namespace.
func Listen(name, network, addr string) (net.Listener, error) {
	var l net.Listener
	var lerr error
	if err := Do(Path(name), func() error { l, lerr = net.Listen(network, addr); return nil }); err != nil {
		return nil, err
	}
	return l, lerr
}

// ListenPacket opens a packet listener inside the named namespace.
func ListenPacket(name, network, addr string) (net.PacketConn, error) {
	var l net.PacketConn
	var lerr error
	if err := Do(Path(name), func() error { l, lerr = net.ListenPacket(network, addr); return nil }); err != nil {
		return nil, err
	}
	return l, lerr
}
