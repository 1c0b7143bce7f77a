//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/test/e2e/loadstat"
)

// What a swap scenario's load expects of a Service port.
const (
	answerHTTP   = "http"    // a new TCP connection and an HTTP answer from a pod
	answerUDP    = "udp"     // a datagram from a new socket answered by a pod
	answerRefuse = "refused" // no endpoints: the connection refused (RST or ICMP)
)

// swapTarget is one Service port under load.
type swapTarget struct {
	svc    string // Service name
	expect string // answerHTTP, answerUDP or answerRefuse
	ip     string
	port   int32
}

func (s swapTarget) addr() string { return net.JoinHostPort(s.ip, fmt.Sprint(s.port)) }

// stream sends requests to one target from one client pod at a fixed rate,
// each on a new connection (a new socket for UDP), whether or not earlier
// ones have answered: a black hole shows as failures, not as a slower load.
type stream struct {
	target swapTarget
	client *podClient

	mu  sync.Mutex
	out []loadstat.Outcome
}

// maxInFlight bounds a stream's outstanding requests (each times out after
// requestTimeout), so that a black-holed target cannot pile up goroutines.
const (
	maxInFlight    = 64
	requestTimeout = 2 * time.Second
)

func (s *stream) run(stop <-chan struct{}, every time.Duration, wg *sync.WaitGroup) {
	defer wg.Done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	slots := make(chan struct{}, maxInFlight)
	var inflight sync.WaitGroup
	defer inflight.Wait()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		select {
		case slots <- struct{}{}:
		default:
			s.record(loadstat.Outcome{Start: time.Now(), End: time.Now(), Err: errors.New("not sent: too many requests in flight")})
			continue
		}
		inflight.Add(1)
		go func() {
			defer inflight.Done()
			defer func() { <-slots }()
			start := time.Now()
			err := s.once()
			s.record(loadstat.Outcome{Start: start, End: time.Now(), Err: err})
		}()
	}
}

func (s *stream) record(o loadstat.Outcome) {
	s.mu.Lock()
	s.out = append(s.out, o)
	s.mu.Unlock()
}

// once makes one request and says whether the target answered as expected.
func (s *stream) once() error {
	switch s.target.expect {
	case answerHTTP:
		return httpOnce(s.client, s.target.addr())
	case answerUDP:
		c, err := s.client.udpConn(s.target.addr())
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = udpAsk(c, requestTimeout)
		return err
	case answerRefuse:
		err := s.client.dialTCP(s.target.addr(), requestTimeout)
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil
		}
		if err == nil {
			return errors.New("connected to a Service without endpoints")
		}
		return err
	}
	return fmt.Errorf("unknown expectation %q", s.target.expect)
}

func (s *stream) outcomes() []loadstat.Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]loadstat.Outcome(nil), s.out...)
}

// httpOnce opens a new connection to addr from cl and asks for a pod's
// name once. Its errors say whether the connection was not made or made and
// not answered (with the client's address, to find its conntrack entry).
func httpOnce(cl *podClient, addr string) error {
	conn, err := netns.DialFunc(cl.netns, requestTimeout)(context.Background(), "tcp", addr)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(requestTimeout))
	if _, err := fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr); err != nil {
		return fmt.Errorf("request from %s: %w", conn.LocalAddr(), err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return fmt.Errorf("answer to %s: %w", conn.LocalAddr(), err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		return fmt.Errorf("answer to %s: %w", conn.LocalAddr(), err)
	case resp.StatusCode != http.StatusOK || len(strings.TrimSpace(string(body))) == 0:
		return fmt.Errorf("answer to %s: %s %q", conn.LocalAddr(), resp.Status, body)
	}
	return nil
}

// longConn is one long-lived TCP connection to a Service: an HTTP/1.1
// keep-alive request on the same connection every interval. Established
// connections carry their NAT in conntrack, so a swap of the rules must not
// break them; the first error ends it.
type longConn struct {
	target swapTarget
	client *podClient

	mu       sync.Mutex
	requests int
	answers  map[string]int // pod -> answers (one pod: the connection never moved)
	err      error          // why it ended early, nil while it lives
	errAt    time.Time
}

func (l *longConn) run(stop <-chan struct{}, every time.Duration, wg *sync.WaitGroup) {
	defer wg.Done()
	fail := func(err error) {
		l.mu.Lock()
		l.err, l.errAt = err, time.Now()
		l.mu.Unlock()
	}
	conn, err := netns.DialFunc(l.client.netns, requestTimeout)(context.Background(), "tcp", l.target.addr())
	if err != nil {
		fail(fmt.Errorf("dial: %w", err))
		return
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		name, err := keepAliveGet(conn, br, l.target.addr())
		if err != nil {
			fail(err)
			return
		}
		l.mu.Lock()
		l.requests++
		l.answers[name]++
		l.mu.Unlock()
	}
}

// keepAliveGet sends one HTTP/1.1 request on conn and reads the answer,
// leaving the connection open.
func keepAliveGet(conn net.Conn, br *bufio.Reader, host string) (string, error) {
	_ = conn.SetDeadline(time.Now().Add(requestTimeout))
	if _, err := fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host); err != nil {
		return "", fmt.Errorf("write: %w", err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return "", fmt.Errorf("read: %w", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return "", fmt.Errorf("read body: %w", err)
	}
	if resp.StatusCode != http.StatusOK || resp.Close {
		return "", fmt.Errorf("answer %s (close %v): %s", resp.Status, resp.Close, body)
	}
	return strings.TrimSpace(string(body)), nil
}

// longConnState is what a long-lived connection did: requests answered,
// pods that answered, and the error that ended it (nil if it lived to the
// end) with its time.
type longConnState struct {
	requests int
	answers  map[string]int
	err      error
	errAt    time.Time
}

func (l *longConn) state() longConnState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return longConnState{requests: l.requests, answers: maps.Clone(l.answers), err: l.err, errAt: l.errAt}
}

// swapLoad is the steady load of a swap scenario: a stream per target and
// client pod, and long-lived connections to the first HTTP target.
type swapLoad struct {
	streams []*stream
	long    []*longConn
	start   time.Time
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
	end     time.Time
}

func startSwapLoad(targets []swapTarget, cls []*podClient, rate, longPerClient int) *swapLoad {
	l := &swapLoad{start: time.Now(), stop: make(chan struct{})}
	every := time.Second / time.Duration(rate)
	for _, cl := range cls {
		for _, tg := range targets {
			s := &stream{target: tg, client: cl}
			l.streams = append(l.streams, s)
			l.wg.Add(1)
			go s.run(l.stop, every, &l.wg)
		}
		for _, tg := range targets {
			if tg.expect != answerHTTP {
				continue
			}
			for range longPerClient {
				lc := &longConn{target: tg, client: cl, answers: map[string]int{}}
				l.long = append(l.long, lc)
				l.wg.Add(1)
				go lc.run(l.stop, 100*time.Millisecond, &l.wg)
			}
			break
		}
	}
	return l
}

// finish stops the load and waits for every request in flight.
func (l *swapLoad) finish() {
	l.once.Do(func() {
		l.end = time.Now()
		close(l.stop)
	})
	l.wg.Wait()
}
