// Package echoserver is the one tiny backend of the demo, the kernel tests and the
// e2e node agent's pods: HTTP and UDP servers that answer with a name, and a client
// that asks them.
package echoserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Handler answers every HTTP request with name and a newline. GET /clientip answers
// with the source address the server sees instead (is the client NATed?), and a
// query ?sleep=DURATION waits that long before answering.
func Handler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if d := r.URL.Query().Get("sleep"); d != "" {
			if dur, err := time.ParseDuration(d); err == nil {
				time.Sleep(dur)
			}
		}
		if r.URL.Path == "/clientip" {
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			fmt.Fprintln(w, host)
			return
		}
		fmt.Fprintln(w, name)
	})
}

// HTTPServer is an http.Server with Handler(name); serve it on any listener (one
// opened inside a network namespace, say) and Close it to stop.
func HTTPServer(name string) *http.Server {
	return &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: Handler(name)}
}

// EchoUDP answers every datagram on pc with "NAME MESSAGE" until pc is closed, which
// returns nil.
func EchoUDP(pc net.PacketConn, name string) error {
	buf := make([]byte, 2048)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		_, _ = pc.WriteTo([]byte(name+" "+string(buf[:n])), from)
	}
}

// Serve answers HTTP on tcpAddr and UDP datagrams on udpAddr with name (either may be
// empty) until ctx ends.
func Serve(ctx context.Context, name, tcpAddr, udpAddr string) error {
	// Both sockets are bound before either is served: whoever sees one answer
	// may rely on the other being there.
	var l net.Listener
	var pc net.PacketConn
	var err error
	if tcpAddr != "" {
		if l, err = net.Listen("tcp", tcpAddr); err != nil {
			return err
		}
	}
	if udpAddr != "" {
		if pc, err = net.ListenPacket("udp", udpAddr); err != nil {
			if l != nil {
				l.Close()
			}
			return err
		}
	}
	errs := make(chan error, 2)
	if l != nil {
		srv := HTTPServer(name)
		go func() { <-ctx.Done(); srv.Close() }()
		go func() { errs <- srv.Serve(l) }()
	}
	if pc != nil {
		go func() { <-ctx.Done(); pc.Close() }()
		go func() { errs <- EchoUDP(pc, name) }()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		if err == nil || errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}
