package echoserver

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/poll"
)

func TestHandler(t *testing.T) {
	for _, tc := range []struct{ path, remote, want string }{
		{"/", "10.244.1.5:4000", "pod1\n"},
		{"/anything?x=1", "10.244.1.5:4000", "pod1\n"},
		{"/clientip", "10.244.1.5:4000", "10.244.1.5\n"},
		{"/?sleep=1ms", "10.244.1.5:4000", "pod1\n"},
	} {
		req := httptest.NewRequest("GET", tc.path, nil)
		req.RemoteAddr = tc.remote
		rec := httptest.NewRecorder()
		Handler("pod1").ServeHTTP(rec, req)
		if got := rec.Body.String(); got != tc.want {
			t.Errorf("GET %s from %s = %q, want %q", tc.path, tc.remote, got, tc.want)
		}
	}
}

func TestServeAndGet(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	udpAddr := pc.LocalAddr().String()
	pc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, "pod2", addr, udpAddr) }()
	poll.Eventually(t, 5*time.Second, "HTTP answer", func() (bool, string) {
		got, err := Get(addr, time.Second)
		return got == "pod2", fmt.Sprintf("Get = %q, %v; want pod2", got, err)
	})
	// Serve binds both sockets before serving either (CI once saw the UDP
	// socket missing after HTTP answered); a lost datagram is retried.
	poll.Eventually(t, 5*time.Second, "UDP answer", func() (bool, string) {
		got, err := udpExchange(udpAddr, "hello")
		return got == "pod2 hello", fmt.Sprintf("%q, %v; want \"pod2 hello\"", got, err)
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after cancel: %v", err)
	}
}

// udpExchange sends msg to addr and returns the answer, trimmed.
func udpExchange(addr, msg string) (string, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, 100)
	n, err := c.Read(buf)
	return strings.TrimSpace(string(buf[:n])), err
}
