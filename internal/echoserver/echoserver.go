// Package echoserver is the tiny backend used by the demo and the kernel tests: HTTP
// and UDP servers that answer with a name, and a client that asks them.
package echoserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Serve answers HTTP on tcpAddr and UDP datagrams on udpAddr with name (either may be
// empty) until ctx ends.
func Serve(ctx context.Context, name, tcpAddr, udpAddr string) error {
	errs := make(chan error, 2)
	if tcpAddr != "" {
		l, err := net.Listen("tcp", tcpAddr)
		if err != nil {
			return err
		}
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if d := r.URL.Query().Get("sleep"); d != "" {
				if dur, err := time.ParseDuration(d); err == nil {
					time.Sleep(dur)
				}
			}
			fmt.Fprintln(w, name)
		})}
		go func() { <-ctx.Done(); srv.Close() }()
		go func() { errs <- srv.Serve(l) }()
	}
	if udpAddr != "" {
		pc, err := net.ListenPacket("udp", udpAddr)
		if err != nil {
			return err
		}
		go func() { <-ctx.Done(); pc.Close() }()
		go func() {
			buf := make([]byte, 2048)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					errs <- err
					return
				}
				_, _ = pc.WriteTo([]byte(name+" "+string(buf[:n])), from)
			}
		}()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
			return nil
		}
		return err
	}
}

// Get fetches http://target (host:port, optionally with a path) on a new connection
// and returns the trimmed body.
func Get(target string, timeout time.Duration) (string, error) {
	if !strings.Contains(target, "/") {
		target += "/"
	}
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + target)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}
