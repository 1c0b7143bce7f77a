package proxy

import (
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// Limits of TestKernelRepairTime. A first repair must restore traffic within
// repairP99Limit at p99 (issue 23: "repair within 1 s of any foreign change"); a
// second fault within the rate-limit window waits for the window's end
// (minRepairInterval after the first fault was seen), so it gets that plus
// half a second.
const (
	repairP99Limit    = time.Second
	repairSecondLimit = minRepairInterval + 500*time.Millisecond
	// probeEvery is how often a new connection is opened while the Service is
	// broken, probeTimeout how long each may take to connect; probeGiveUp ends a
	// try that was never repaired.
	probeEvery   = 5 * time.Millisecond
	probeTimeout = 200 * time.Millisecond
	probeGiveUp  = 5 * time.Second
	// repairQuiet separates a try's repair from the next fault, so that each try
	// measures a first repair, not one deferred by the rate limit.
	repairQuiet = minRepairInterval + 200*time.Millisecond
)

// repairFault is a foreign change that breaks the web Service, queued on
// another program's netlink connection for the caller to commit.
type repairFault struct {
	name  string
	queue func(t *testing.T, c *nftables.Conn)
}

// repairTry is what one fault cost, every time from just before the fault's
// commit was sent: restored is when the first new TCP connection through the
// ClusterIP after the fault connected (and was then answered by the backend);
// firstOK is when that connection's SYN left, lastFailed when the last SYN
// before it that got no connection left (the repair came between the two);
// failed counts those failed connections (0: the repair was faster than any
// probe could see); late counts connections whose SYN left after firstOK that
// failed anyway; flush is when the commit returned.
type repairTry struct {
	restored, firstOK, lastFailed, flush time.Duration
	failed, late                         int
}

// TestKernelRepairTime measures, with traffic, how long a foreign change to our
// table leaves a Service broken when only the kernel's nftables notifications
// can repair it (--sync-period 1 h): our table deleted, the ClusterIP dispatch
// map flushed, and a rule replaced by a forged drop that carries svcproxy's own
// user data, each SVCPROXY_REPAIR_TRIES times, spaced by more than the repair's
// rate limit, then once more right after a repair (inside the rate-limit
// window). It fails when a first repair's p99 exceeds repairP99Limit, or a
// second fault's repair repairSecondLimit. Skipped unless asked for:
//
//	SVCPROXY_REPAIR_TRIES=20 go test -count=1 -run 'TestKernelRepairTime$' -v ./pkg/proxy/
func TestKernelRepairTime(t *testing.T) {
	tries, _ := strconv.Atoi(os.Getenv("SVCPROXY_REPAIR_TRIES"))
	if tries <= 0 {
		t.Skip("a measurement: set SVCPROXY_REPAIR_TRIES=20 to run it")
	}
	e := newKenv(t)
	addWeb(e.tr, "web", "10.96.0.10", "pod1")
	m := NewMetrics(nil)
	p := watchingProxy(t, e, m)
	// The time svcproxy spent reading the table back: a drift check is deferred
	// until ten times the last read's duration has passed (refreshView), a second
	// limit beside the repair's rate limit.
	readTime := func() time.Duration {
		var d dto.Metric
		if err := m.KernelReadDuration.(prometheus.Metric).Write(&d); err != nil {
			t.Fatal(err)
		}
		return time.Duration(d.GetHistogram().GetSampleSum() * float64(time.Second))
	}
	poll.Eventually(t, 10*time.Second, "the Service", func() (bool, string) {
		body, err := e.client.Get("10.96.0.10:80", 500*time.Millisecond)
		return err == nil && body == "pod1", fmt.Sprintf("answer %q, %v", body, err)
	})

	tb := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}
	faults := []repairFault{
		{"table-deleted", func(t *testing.T, c *nftables.Conn) { c.DelTable(tb) }},
		{"clusterip-map-flushed", func(t *testing.T, c *nftables.Conn) {
			c.FlushSet(&nftables.Set{Table: tb, Name: mapServiceIPs})
		}},
		{"rule-forged-drop", func(t *testing.T, c *nftables.Conn) { queueForgery(t, c, forgeries[0]) }},
	}
	probes := newProber(t, e)
	var failures []string
	for _, f := range faults {
		var restored []time.Duration
		beforeFirstProbe, late := 0, 0
		var maxRead time.Duration
		try := func(i string) repairTry {
			read0 := readTime()
			r := probes.fault(t, f)
			read := readTime() - read0
			maxRead = max(maxRead, read)
			t.Logf("repair-try kind=%s try=%s restored_ms=%.1f first_ok_syn_ms=%.1f last_failed_syn_ms=%.1f failed_probes=%d late_failed_probes=%d flush_ms=%.1f read_ms=%.1f",
				f.name, i, ms(r.restored), ms(r.firstOK), ms(r.lastFailed), r.failed, r.late, ms(r.flush), ms(read))
			return r
		}
		for i := range tries {
			time.Sleep(repairQuiet)
			r := try(strconv.Itoa(i + 1))
			restored = append(restored, r.restored)
			late += r.late
			if r.failed == 0 {
				beforeFirstProbe++
			}
		}
		// Right after the last try's repair: the rate limit defers this one.
		second := try("second")
		poll.Eventually(t, 5*time.Second, f.name+": the kernel holds the desired table", func() (bool, string) {
			out, err := e.w.Node.Run("nft", "list", "table", "ip", TableName)
			if err != nil {
				return false, err.Error()
			}
			return nft.NormalizeListing(out) == p.Desired().Text(), out
		})
		slices.Sort(restored)
		p50, p99 := nearestRank(restored, 0.50), nearestRank(restored, 0.99)
		t.Logf("repair-time kind=%s tries=%d p50_ms=%.1f p99_ms=%.1f max_ms=%.1f repaired_before_first_probe=%d late_failed_probes=%d second_fault_ms=%.1f second_fault_failed_probes=%d max_read_ms=%.1f load=%s",
			f.name, tries, ms(p50), ms(p99), ms(restored[len(restored)-1]), beforeFirstProbe, late,
			ms(second.restored), second.failed, ms(maxRead), loadAverage())
		if p99 > repairP99Limit {
			failures = append(failures, fmt.Sprintf("%s: p99 %v over %d tries, want at most %v", f.name, p99, tries, repairP99Limit))
		}
		if second.restored > repairSecondLimit {
			failures = append(failures, fmt.Sprintf("%s: a second fault within the rate-limit window was repaired in %v, want at most %v", f.name, second.restored, repairSecondLimit))
		}
		if second.failed == 0 {
			failures = append(failures, fmt.Sprintf("%s: no probe saw the Service broken for the second fault's second: the fault or the probe does not work", f.name))
		}
	}
	for _, s := range failures {
		t.Error(s)
	}
}

// prober opens new TCP connections to the web Service from the client pod,
// each from a source port never used before in the test (a failed attempt's
// conntrack entry, without NAT, would otherwise catch a later one). Its sockets
// are made by a thread that stays in the client's namespace: entering it for
// each connection (netnstest's Dial) took 6-25 ms under load, so that the
// first SYN often left after the repair and no probe saw the Service broken.
type prober struct {
	e       *kenv
	port    atomic.Int32
	sockets chan chan socketResult
	// giveUp ends a try that was never repaired (probeGiveUp unless set).
	giveUp time.Duration
}

type socketResult struct {
	fd  int
	err error
}

func newProber(t *testing.T, e *kenv) *prober {
	pr := &prober{e: e, sockets: make(chan chan socketResult), giveUp: probeGiveUp}
	pr.port.Store(10000)
	ready := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine, in the namespace.
		runtime.LockOSThread()
		if err := unix.Setns(e.client.Fd, unix.CLONE_NEWNET); err != nil {
			ready <- err
			return
		}
		ready <- nil
		for reply := range pr.sockets {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			reply <- socketResult{fd, err}
		}
	}()
	if err := <-ready; err != nil {
		t.Fatalf("enter the client's namespace: %v", err)
	}
	t.Cleanup(func() { close(pr.sockets) })
	return pr
}

// probe is one connection attempt: when its SYN left, when it connected,
// whether the backend answered on it.
type probe struct {
	start, connected time.Time
	ok               bool
	err              error
}

// fault commits f on a netlink connection of its own and, from just before the
// commit is sent, opens a new connection every probeEvery, until one whose SYN
// left after the commit returned has been answered. The commit returns 6-25 ms
// after it is sent on this machine (the kernel notifies svcproxy before it
// acknowledges), and the repair often lands within that: probes that start only
// once it returned often never see the Service broken.
func (pr *prober) fault(t *testing.T, f repairFault) repairTry {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(pr.e.w.Node.Fd))
	if err != nil {
		t.Fatal(err)
	}
	f.queue(t, c)
	results := make(chan probe, 1024)
	var inflight sync.WaitGroup
	var done []probe
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	giveUp := time.After(pr.giveUp)
	flushErr := make(chan error, 1)
	var flushed time.Time // when the commit returned
	start := time.Now()
	go func() { flushErr <- c.Flush() }()
	// answered: an answered probe whose SYN left after the commit returned.
	answered := func() bool {
		for _, r := range done {
			if r.ok && !flushed.IsZero() && r.start.After(flushed) {
				return true
			}
		}
		return false
	}
	for !answered() {
		reply := make(chan socketResult, 1)
		pr.sockets <- reply
		inflight.Add(1)
		go func() { defer inflight.Done(); results <- pr.once(<-reply) }()
	wait:
		for {
			select {
			case err := <-flushErr:
				if err != nil {
					inflight.Wait()
					t.Fatalf("%s: %v", f.name, err)
				}
				flushed = time.Now()
				if answered() {
					break wait
				}
			case r := <-results:
				done = append(done, r)
				if answered() {
					break wait
				}
			case <-tick.C:
				break wait
			case <-giveUp:
				inflight.Wait()
				t.Fatalf("%s: the Service did not answer a new connection within %v of the fault (%d attempts)", f.name, pr.giveUp, len(done))
			}
		}
	}
	go func() { inflight.Wait(); close(results) }()
	for r := range results {
		done = append(done, r)
	}
	// The Service went good, broken (failed probes), good: the first answered
	// probe whose SYN left after the first failed one's is the repair; with no
	// failure, the first whose SYN left after the commit returned.
	after := flushed
	var firstFailed *probe
	for i := range done {
		if !done[i].ok && (firstFailed == nil || done[i].start.Before(firstFailed.start)) {
			firstFailed = &done[i]
		}
	}
	if firstFailed != nil {
		after = firstFailed.start
	}
	var first *probe
	for i := range done {
		if done[i].ok && done[i].start.After(after) && (first == nil || done[i].connected.Before(first.connected)) {
			first = &done[i]
		}
	}
	if first == nil {
		t.Fatalf("%s: no connection after the first failed one (%v after the fault) was answered", f.name, firstFailed.start.Sub(start))
	}
	out := repairTry{restored: first.connected.Sub(start), firstOK: first.start.Sub(start), flush: flushed.Sub(start)}
	for _, r := range done {
		switch {
		case r.ok:
		case r.start.Before(first.start):
			out.failed++
			out.lastFailed = max(out.lastFailed, r.start.Sub(start))
		default:
			out.late++
			t.Logf("%s: a connection whose SYN left %v after the first good one's failed: %v", f.name, r.start.Sub(first.start), r.err)
		}
	}
	return out
}

// once connects socket s (made in the client's namespace) to the Service from a
// new source port, waiting at most probeTimeout, and asks the backend who it is.
func (pr *prober) once(s socketResult) (r probe) {
	r.start = time.Now()
	if s.err != nil {
		r.err = s.err
		return r
	}
	fd := s.fd
	owned := true
	defer func() {
		if owned {
			unix.Close(fd)
		}
	}()
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: int(pr.port.Add(1))}); err != nil {
		r.err = fmt.Errorf("bind: %w", err)
		return r
	}
	r.start = time.Now()
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: 80, Addr: [4]byte{10, 96, 0, 10}}); err != nil && err != unix.EINPROGRESS {
		r.err = fmt.Errorf("connect: %w", err)
		return r
	}
	for {
		left := probeTimeout - time.Since(r.start)
		if left <= 0 {
			r.err = fmt.Errorf("no connection within %v", probeTimeout)
			return r
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}, int(left.Milliseconds())+1)
		if err == unix.EINTR || (err == nil && n == 0) {
			continue
		}
		if err != nil {
			r.err = fmt.Errorf("poll: %w", err)
			return r
		}
		break
	}
	if soerr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil || soerr != 0 {
		r.err = fmt.Errorf("connect: %v %v", syscall.Errno(soerr), err)
		return r
	}
	r.connected = time.Now()
	owned = false
	f := os.NewFile(uintptr(fd), "probe")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		r.err = err
		return r
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.0\r\nHost: x\r\n\r\n"); err != nil {
		r.err = err
		return r
	}
	b, err := io.ReadAll(c)
	r.ok = err == nil && strings.HasSuffix(strings.TrimSpace(string(b)), "pod1")
	if !r.ok {
		r.err = fmt.Errorf("connected, then answer %q, %v", b, err)
	}
	return r
}

// nearestRank is the q quantile of sorted by the nearest-rank method: of 20
// tries, p99 is the largest.
func nearestRank(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// loadAverage is the machine's 1, 5 and 15 minute load averages, comma
// separated.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ",")
}
