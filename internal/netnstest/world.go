package netnstest

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/echoserver"
)

// World is a node namespace with pods attached by veth, like one kind node: each pod
// has a /32 address, a default route via 169.254.1.1 on its veth, and the node routes
// each pod address to its veth. The node's own default route points into the world,
// so ClusterIP traffic originated on the node reaches the nat hooks.
type World struct {
	t    testing.TB
	Node *NS
	Pods map[string]*NS
	n    int
}

// NewWorld creates the node namespace.
func NewWorld(t testing.TB) *World {
	t.Helper()
	w := &World{t: t, Node: New(t, "node"), Pods: map[string]*NS{}}
	w.Node.MustRun(t, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	return w
}

// AddPod attaches a pod namespace with address addr.
func (w *World) AddPod(name, addr string) *NS {
	t := w.t
	t.Helper()
	w.n++
	ns := New(t, name)
	host := fmt.Sprintf("vh%d-%d", os.Getpid()%100000, w.n)
	if out, err := w.Node.Run("ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns.Name); err != nil {
		t.Fatalf("veth for %s: %v: %s", name, err, out)
	}
	ns.MustRun(t, "ip", "addr", "add", addr+"/32", "dev", "eth0")
	ns.MustRun(t, "ip", "link", "set", "eth0", "up")
	ns.MustRun(t, "ip", "route", "add", "169.254.1.1", "dev", "eth0", "scope", "link")
	ns.MustRun(t, "ip", "route", "add", "default", "via", "169.254.1.1", "dev", "eth0")
	w.Node.MustRun(t, "ip", "addr", "add", "169.254.1.1/32", "dev", host)
	w.Node.MustRun(t, "ip", "link", "set", host, "up")
	w.Node.MustRun(t, "ip", "route", "add", addr+"/32", "dev", host)
	w.Node.MustRun(t, "sysctl", "-qw", "net.ipv4.conf."+host+".proxy_arp=1")
	if w.n == 1 {
		w.Node.MustRun(t, "ip", "route", "add", "default", "dev", host)
	}
	w.Pods[name] = ns
	return ns
}

// echoEnv names the environment variable that turns a re-executed test binary into
// an echo server (see ServeEchoIfAsked).
const echoEnv = "SVCPROXY_TEST_ECHO"

// ServeEchoIfAsked must be called first in TestMain of packages that use StartEcho:
// when the binary was re-executed as a pod's server it serves and never returns.
func ServeEchoIfAsked() {
	name := os.Getenv(echoEnv)
	if name == "" {
		return
	}
	err := echoserver.Serve(context.Background(), name, ":80", ":53")
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// StartEcho runs an echo server named name in ns (HTTP :80, UDP :53) by re-executing
// the test binary there, and waits until it answers.
func StartEcho(t testing.TB, ns *NS, name string) {
	t.Helper()
	cmd := ns.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), echoEnv+"="+name)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start echo %s: %v", name, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Generous: re-executing a -race test binary took over 5 s on a loaded
	// 2-core machine (load 25), failing kernel tests that had nothing wrong.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := ns.Dial("tcp", "127.0.0.1:80", time.Second); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("echo server %s did not start", name)
}

// Get makes one HTTP request on a new connection from ns and returns who answered.
func (ns *NS) Get(addr string, timeout time.Duration) (string, error) {
	return ns.GetFrom("", addr, "/", timeout)
}

// GetFrom requests path on a new connection from source address src in ns ("" lets
// the kernel choose) and returns the body: who answered for "/", the address the
// server saw for "/clientip".
func (ns *NS) GetFrom(src, addr, path string, timeout time.Duration) (string, error) {
	local := ""
	if src != "" {
		local = net.JoinHostPort(src, "0")
	}
	c, err := ns.DialFrom("tcp", local, addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.0\r\nHost: x\r\n\r\n"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return "", err
	}
	s := string(b)
	if i := strings.Index(s, "\r\n\r\n"); i >= 0 {
		s = s[i+4:]
	}
	return strings.TrimSpace(s), nil
}

// UDP sends msg on c and returns the reply.
func UDP(c net.Conn, msg string, timeout time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
