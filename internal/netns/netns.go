// Package netns works with named network namespaces without moving the process:
// a function runs on a locked OS thread that enters the namespace and leaves it
// again. Sockets keep the namespace they were created in, so a socket opened
// inside fn can be used from any goroutine afterwards. It is the one namespace
// package of the kernel tests (via internal/netnstest), bench and e2e suite.
package netns

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Path is the bind mount of the named network namespace NAME (`ip netns add NAME`).
func Path(name string) string { return "/run/netns/" + name }

// Do runs fn on an OS thread that has entered the network namespace at path (for
// example /run/netns/NAME) and returns fn's error.
func Do(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open own netns: %w", err)
			return
		}
		defer orig.Close()
		target, err := os.Open(path)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open netns %s: %w", path, err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter netns %s: %w", path, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: the runtime ends it with this goroutine.
			errc <- fmt.Errorf("leave netns %s: %w", path, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
