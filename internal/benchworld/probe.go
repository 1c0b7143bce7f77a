package benchworld

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/netns"
)

// Prober opens TCP connections from the client namespace. Sockets are created in
// the namespace in batches (entering a namespace costs more than a connection), so
// a probe is one connect and one read: the connect's duration is the new-connection
// latency, with nothing of the harness in it.
type Prober struct {
	ns      string
	timeout time.Duration
	mu      sync.Mutex
	spare   map[int][]int // by address family: unix.AF_INET, unix.AF_INET6
}

// minReadTimeout bounds a probe's read of the answer, however short its connect's.
const minReadTimeout = time.Second

// NewProber probes from the world's client namespace; timeout bounds each connect
// (a SYN that nothing answers) and read (at least minReadTimeout).
func (w *World) NewProber(timeout time.Duration) *Prober {
	return &Prober{ns: w.Client, timeout: timeout, spare: map[int][]int{}}
}

// socket returns a TCP socket of address family af made in the namespace.
func (p *Prober) socket(af int) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.spare[af]) == 0 {
		err := netns.Do(netns.Path(p.ns), func() error {
			for range 256 {
				fd, err := unix.Socket(af, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					return fmt.Errorf("socket: %w", err)
				}
				p.spare[af] = append(p.spare[af], fd)
			}
			return nil
		})
		if err != nil && len(p.spare[af]) == 0 {
			return -1, err
		}
	}
	spare := p.spare[af]
	fd := spare[len(spare)-1]
	p.spare[af] = spare[:len(spare)-1]
	return fd, nil
}

// Close closes the spare sockets.
func (p *Prober) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, fds := range p.spare {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	p.spare = map[int][]int{}
}

// Probe connects to addr:port and returns the address of the endpoint that
// answered and how long the connect took. A connect that a signal interrupted
// (connects with SO_SNDTIMEO are not restarted) returns an error wrapping
// unix.EINTR: the attempt says nothing about the path, try again.
func (p *Prober) Probe(addr netip.Addr, port int) (answer netip.Addr, connect time.Duration, err error) {
	return p.probe(addr, port, p.timeout)
}

// Answer is Probe for callers that ask where a Service answers, not how one
// attempt went: a connect a signal interrupted is tried again, up to 3 times.
func (p *Prober) Answer(addr netip.Addr, port int) (answer netip.Addr, connect time.Duration, err error) {
	return p.answer(addr, port, p.timeout)
}

// answer is Answer with a connect timeout of its own.
func (p *Prober) answer(addr netip.Addr, port int, timeout time.Duration) (answer netip.Addr, connect time.Duration, err error) {
	answer, connect, err = p.probe(addr, port, timeout)
	for try := 0; errors.Is(err, unix.EINTR) && try < 3; try++ {
		answer, connect, err = p.probe(addr, port, timeout) // a signal: says nothing
	}
	return answer, connect, err
}

// probe is Probe with a connect timeout of its own.
func (p *Prober) probe(addr netip.Addr, port int, timeout time.Duration) (answer netip.Addr, connect time.Duration, err error) {
	af, sa := unix.AF_INET6, unix.Sockaddr(&unix.SockaddrInet6{Port: port, Addr: addr.As16()})
	if addr.Is4() {
		af, sa = unix.AF_INET, &unix.SockaddrInet4{Port: port, Addr: addr.As4()}
	}
	fd, err := p.socket(af)
	if err != nil {
		return netip.Addr{}, 0, err
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	// A blocking connect gives up after SO_SNDTIMEO.
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		return netip.Addr{}, 0, fmt.Errorf("SO_SNDTIMEO: %w", err)
	}
	// Once connected, the path is programmed (nothing answers a SYN to a
	// ClusterIP that is not), and the read only names the endpoint; the endpoint
	// is a goroutine of the harness, which a busy machine may run later than a
	// short connect timeout: a read that gave up then counted a programmed
	// Service as not answering, and a cold sync as seconds longer.
	tv = unix.NsecToTimeval(max(timeout, minReadTimeout).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return netip.Addr{}, 0, fmt.Errorf("SO_RCVTIMEO: %w", err)
	}
	start := time.Now()
	err = unix.Connect(fd, sa)
	connect = time.Since(start)
	if err != nil {
		return netip.Addr{}, connect, fmt.Errorf("connect %s:%d: %w", addr, port, err)
	}
	buf := make([]byte, 64)
	n, err := unix.Read(fd, buf)
	for err == unix.EINTR { // a signal; SO_RCVTIMEO reads are not restarted
		n, err = unix.Read(fd, buf)
	}
	if err != nil {
		return netip.Addr{}, connect, fmt.Errorf("read %s:%d: %w", addr, port, err)
	}
	answer, err = netip.ParseAddr(strings.TrimSpace(string(buf[:max(n, 0)])))
	if err != nil {
		return netip.Addr{}, connect, fmt.Errorf("answer from %s:%d: %w", addr, port, err)
	}
	return answer, connect, nil
}
