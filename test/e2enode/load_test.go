//go:build e2enode

package e2enode

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// load opens a new connection to addr from each client every interval and
// records every result, until stop.
type load struct {
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	res  map[string][]result
}

type result struct {
	at      time.Time
	err     error
	retrans uint32 // retransmissions the kernel needed (SYN included)
}

// Judging a connection. The machine is shared (load 15-20 on 2 cores): the
// test process itself can stall for seconds (seen: 7.8 s, both clients at
// once), and a wall-clock timeout then fails connections the network served
// at once: such a stall made a client's dial "succeed after 7.788s" and its
// write then fail on the expired deadline. So a connection is judged by what
// the kernel saw, which goes on while the process stalls: it fails if it is
// refused or reset, if it gets no answer within probeTimeout, or if the
// kernel retransmitted maxRetrans times or more (tcpi_total_retrans: the SYN
// and its first retransmission unanswered, 2 s of silence on this kernel,
// whose first SYN retransmissions are 1 s apart (tcp_syn_linear_timeouts;
// checked: a SYN dropped for 1.5 s connects after 2.05 s with 2), as the 2 s
// client timeout allowed before). One retransmission (a 1 s hiccup) is
// counted and reported, not failed.
const (
	probeTimeout = 10 * time.Second
	maxRetrans   = 2
)

// probe is one request of the load: a new connection from client's
// namespace, GET /, the answer read to the end. It returns the kernel's
// retransmission count and, on failure, how far it got (the dial, or the
// answer on a connection from which local port, findable in the nodes'
// conntrack events).
func probe(client, addr string, onSlow func(client, netnsPath string)) (uint32, error) {
	path, err := podNetns(client)
	if err != nil {
		return 0, err
	}
	if onSlow != nil {
		// A connection not done after 2.5 s is caught in the act: the
		// kernel's view (its socket, the nodes' conntrack entries) while
		// it still retries.
		slow := time.AfterFunc(2500*time.Millisecond, func() { onSlow(client, path) })
		defer slow.Stop()
	}
	start := time.Now()
	conn, err := dialFromPort(path, addr, probeTimeout, loadPorts.take())
	if err != nil {
		return 0, fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(probeTimeout))
	connected := time.Since(start)
	var b []byte
	if _, err = fmt.Fprintf(conn, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", addr); err == nil {
		b, err = io.ReadAll(conn)
	}
	retrans := retransmissions(conn)
	switch {
	case err != nil || !strings.HasPrefix(string(b), "HTTP/1."):
		return retrans, fmt.Errorf("from %s, connected after %v: answer %q: %v", conn.LocalAddr(), connected.Round(time.Millisecond), b, err)
	case retrans >= maxRetrans:
		return retrans, fmt.Errorf("from %s: the kernel retransmitted %d times (over 3 s without an answer)", conn.LocalAddr(), retrans)
	}
	return retrans, nil
}

// loadPorts hands out the load's local ports, 12000-19999: below both the
// kernel's ephemeral range (32768-60999, every other request of the suite)
// and unservedPorts (20000-31999). Earlier scenarios leave conntrack entries
// behind in the clients' nodes that capture a later SYN of the same 4-tuple
// for up to 120 s: untranslated ones (see unservedPorts) and translated ones
// whose endpoint died with its pod (a SYN_SENT entry towards a pod the seed
// walkthrough had just scaled away was seen at the swap). The load's
// connections never meet them, so what it measures is the swap; 8000 ports
// at 20 connections a second last 400 s, past any entry of its own.
var loadPorts = &portRange{first: 12000, n: 8000}

// retransmissions is the connection's tcpi_total_retrans (SYN retransmissions
// count too).
func retransmissions(conn net.Conn) uint32 {
	sc, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		return 0
	}
	var n uint32
	_ = sc.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			n = info.Total_retrans
		}
	})
	return n
}

// startLoad starts the load; onSlow (nil for none) is called, once, for a
// connection still not done after 2.5 s.
func startLoad(clients []string, addr string, interval time.Duration, onSlow func(client, netnsPath string)) *load {
	l := &load{stop: make(chan struct{}), res: map[string][]result{}}
	for _, client := range clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				select {
				case <-l.stop:
					return
				case <-tick.C:
				}
				at := time.Now()
				retrans, err := probe(client, addr, onSlow)
				l.mu.Lock()
				l.res[client] = append(l.res[client], result{at, err, retrans})
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// finish stops the load and summarises it per client: requests, failures
// (with the first few errors), connections the kernel had to retransmit for
// (once: a 1 s hiccup, not a failure) and the longest stretch without a
// success (which includes the test process's own stalls).
func (l *load) finish() (lines []string, failed int) {
	close(l.stop)
	l.wg.Wait()
	for client, rs := range l.res {
		var f, retransmitted int
		var errs []string
		var gap time.Duration
		last := time.Time{}
		for _, r := range rs {
			if r.retrans > 0 {
				retransmitted++
			}
			if r.err != nil {
				f++
				if len(errs) < 3 {
					errs = append(errs, fmt.Sprintf("%s: %v", r.at.Format("15:04:05.000"), r.err))
				}
				continue
			}
			if !last.IsZero() && r.at.Sub(last) > gap {
				gap = r.at.Sub(last)
			}
			last = r.at
		}
		failed += f
		lines = append(lines, fmt.Sprintf("client=%s requests=%d failed=%d retransmitted=%d longest_gap_ms=%d %v", client, len(rs), f, retransmitted, gap.Milliseconds(), errs))
	}
	return lines, failed
}
