package netnstest

import (
	"fmt"
	"net"
	"runtime"
	"time"

	"github.com/vishvananda/netns"
)

// Dial opens a connection from inside the namespace. The socket is created on an OS
// thread switched into the namespace and keeps living there after the thread
// switches back, so the returned conn can be used from any goroutine.
func (ns *NS) Dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	return ns.DialFrom(network, "", addr, timeout)
}

// DialFrom is Dial with a fixed local address (e.g. ":40000" for a UDP flow that
// must keep its source port).
func (ns *NS) DialFrom(network, local, addr string, timeout time.Duration) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			ch <- result{err: fmt.Errorf("get netns: %w", err)}
			runtime.UnlockOSThread()
			return
		}
		defer orig.Close()
		if err := netns.Set(netns.NsHandle(ns.Fd)); err != nil {
			ch <- result{err: fmt.Errorf("enter %s: %w", ns.Name, err)}
			runtime.UnlockOSThread()
			return
		}
		d := net.Dialer{Timeout: timeout}
		if local != "" {
			switch network {
			case "udp", "udp4":
				d.LocalAddr, err = net.ResolveUDPAddr(network, local)
			default:
				d.LocalAddr, err = net.ResolveTCPAddr(network, local)
			}
		}
		var c net.Conn
		if err == nil {
			c, err = d.Dial(network, addr)
		}
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread() // else the thread stays locked and dies with the goroutine
		}
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// Listen opens a listener inside the namespace (see Dial).
func (ns *NS) Listen(network, addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			ch <- result{err: err}
			runtime.UnlockOSThread()
			return
		}
		defer orig.Close()
		if err := netns.Set(netns.NsHandle(ns.Fd)); err != nil {
			ch <- result{err: err}
			runtime.UnlockOSThread()
			return
		}
		l, err := net.Listen(network, addr)
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{l, err}
	}()
	r := <-ch
	return r.l, r.err
}
