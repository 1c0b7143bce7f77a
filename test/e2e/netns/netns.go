//go:build e2e

// Package netns runs socket operations inside a named network namespace
// (/run/netns/NAME) without moving the calling process: the operation runs on
// a locked OS thread that enters the namespace and leaves it again. Sockets
// keep the namespace they were created in.
package netns

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	inetns "github.com/svcproxy/svcproxy/internal/netns"
)

// Path is the bind-mount path of a named network namespace.
func Path(name string) string { return "/run/netns/" + name }

// Do runs fn on an OS thread that has entered the named network namespace.
func Do(name string, fn func() error) error { return inetns.Do(Path(name), fn) }

// DialFunc returns a dial function whose sockets live in the named namespace.
func DialFunc(name string, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		var derr error
		err := Do(name, func() error {
			d := net.Dialer{Timeout: timeout}
			c, derr = d.DialContext(ctx, network, addr)
			return nil
		})
		if err != nil {
			return nil, err
		}
		return c, derr
	}
}

// Listen opens a stream listener inside the named namespace.
func Listen(name, network, addr string) (net.Listener, error) {
	var l net.Listener
	var lerr error
	if err := Do(name, func() error { l, lerr = net.Listen(network, addr); return nil }); err != nil {
		return nil, err
	}
	return l, lerr
}

// ListenPacket opens a packet listener inside the named namespace.
func ListenPacket(name, network, addr string) (net.PacketConn, error) {
	var l net.PacketConn
	var lerr error
	if err := Do(name, func() error { l, lerr = net.ListenPacket(network, addr); return nil }); err != nil {
		return nil, err
	}
	return l, lerr
}

// IP runs the ip(8) command with the given arguments.
func IP(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Exec runs a command inside the named namespace (ip netns exec) and
// returns its combined output.
func Exec(name string, cmd ...string) (string, error) {
	args := append([]string{"netns", "exec", name}, cmd...)
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip netns exec %s %s: %w: %s", name, strings.Join(cmd, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Delete removes the named namespace after killing every process in it.
// A missing namespace is not an error.
func Delete(name string) error {
	if _, err := os.Stat(Path(name)); err != nil {
		return nil
	}
	out, _ := exec.Command("ip", "netns", "pids", name).Output()
	for _, f := range strings.Fields(string(out)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 && pid != os.Getpid() {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
	return IP("netns", "del", name)
}

// List returns the names of the named namespaces that start with prefix.
func List(prefix string) []string {
	ents, err := os.ReadDir("/run/netns")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names
}
