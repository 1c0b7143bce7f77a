// Package netnstest creates network namespaces for kernel tests. Every namespace has
// a per-process name prefix and is removed when the test ends, so tests never touch
// the root namespace and parallel runs never collide.
package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/svcproxy/svcproxy/internal/netns"
)

// NS is a named network namespace.
type NS struct {
	Name string
	// Fd is an open descriptor of the namespace, for netlink.
	Fd int
}

var counter atomic.Int64

// RequireRoot skips the test when it cannot create namespaces.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("kernel test: needs root to create network namespaces (CI runs as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("kernel test: needs iproute2 (`ip`); `make test` installs it")
	}
}

// New creates a namespace with loopback up and removes it when the test ends.
func New(t testing.TB, tag string) *NS {
	t.Helper()
	RequireRoot(t)
	name := fmt.Sprintf("spt%d-%d-%s", os.Getpid(), counter.Add(1), tag)
	if len(name) > 40 {
		name = name[:40]
	}
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	ns := &NS{Name: name}
	t.Cleanup(func() { ns.remove() })
	f, err := os.Open(netns.Path(name))
	if err != nil {
		t.Fatalf("open netns %s: %v", name, err)
	}
	ns.Fd = int(f.Fd())
	t.Cleanup(func() { f.Close() })
	ns.MustRun(t, "ip", "link", "set", "lo", "up")
	return ns
}

// remove kills anything left running inside, then deletes the namespace.
func (ns *NS) remove() { _ = netns.Delete(ns.Name) }

// Run runs a command inside the namespace and returns its combined output.
func (ns *NS) Run(args ...string) (string, error) {
	out, err := ns.Command(args...).CombinedOutput()
	return string(out), err
}

// MustRun is Run that fails the test on error.
func (ns *NS) MustRun(t testing.TB, args ...string) string {
	t.Helper()
	out, err := ns.Run(args...)
	if err != nil {
		t.Fatalf("in %s: %s: %v: %s", ns.Name, strings.Join(args, " "), err, out)
	}
	return out
}

// Command returns an unstarted command that runs inside the namespace.
func (ns *NS) Command(args ...string) *exec.Cmd { return netns.Command(ns.Name, args...) }
