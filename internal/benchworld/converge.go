package benchworld

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Target is one Service port to probe and the endpoints allowed to answer it.
type Target struct {
	IP     netip.Addr
	Port   int
	Serves func(netip.Addr) bool
}

const (
	// sentinels is how many targets are watched closely while a sync is under way.
	sentinels = 128
	// roundPause spaces the rounds of probes, so that probing takes little of the
	// CPU the proxy being measured needs; it bounds the resolution of AllAnswer.
	roundPause = 20 * time.Millisecond
	// idleRounds is how much longer than the CPU a round used the pause after it
	// is at least. A Service not programmed yet may be refused at once, so a round
	// of sentinels is a burst of CPU: with a fixed 5 ms pause the prober took half
	// a core of the machine's two while a 30k cold sync was timed. It is the
	// round's CPU, not its length: where a proxy drops the SYN instead (svcproxy
	// drops new connections to Service CIDR addresses no Service holds yet), a
	// round is connects waiting out their timeout, and ten times that paused the
	// probing for 30 s while the 30k shared shape's table was complete.
	idleRounds = 10
	// sweepTimeout is the sweep's connect timeout: past the first retransmission
	// of a SYN (the kernel's initial RTO is 1 s).
	sweepTimeout = 1500 * time.Millisecond
)

// AllAnswer returns when every target has answered from one of its own endpoints,
// and the time the last of them first did. A sweep over tens of thousands of
// targets takes seconds, which would be added to every measurement, so it first
// probes, round and round, a spread sample of targets (the first, the last and
// random ones: most transactions a proxy splits its sync into hold some) until all
// of them answered; then it sweeps every target once, and probes one that does not
// answer yet again until it does. The time returned is the later of the sample's
// and the stragglers' last first answer: traffic decides, never a proxy's word.
func AllAnswer(ctx context.Context, p *Prober, targets []Target, workers int) (Converged, error) {
	if len(targets) == 0 {
		return Converged{At: time.Now()}, nil
	}
	sample := map[int]bool{0: true, len(targets) - 1: true}
	for len(sample) < min(sentinels, len(targets)) {
		sample[rand.IntN(len(targets))] = true
	}
	var idx []int
	for i := range sample {
		idx = append(idx, i)
	}
	// A worker per sentinel: a round takes one connect timeout, not one per
	// sentinel, when the proxy drops their SYNs.
	last, err := untilAnswered(ctx, p, targets, idx, len(idx))
	if err != nil {
		return Converged{}, fmt.Errorf("sample: %w", err)
	}
	c := Converged{At: last, Sample: last}
	idx = idx[:0]
	for i := range targets {
		if !sample[i] {
			idx = append(idx, i)
		}
	}
	// The sweep: one probe each; those that answer were answering already. One
	// that does not is probed again at once until it answers, and its first
	// answer counts: the sample answers as the last transactions still commit,
	// and probed again only after the sweep, 9 such stragglers were stamped 4 s
	// late. A miss is a refusal (not programmed) or an answer from elsewhere:
	// the connect waits past a lost SYN's retransmission (2 of 30k were lost
	// with the sample's 50 ms), and a connect a signal interrupted is retried
	// (one stamped a 4.6 s sync 8.4 s).
	var mu sync.Mutex
	var sweepErr error
	parallel(len(idx), workers, func(k int) {
		t := targets[idx[k]]
		a, _, err := p.answer(t.IP, t.Port, max(p.timeout, sweepTimeout))
		if err == nil && t.Serves(a) {
			return
		}
		if err == nil {
			err = fmt.Errorf("%s:%d answered from %s, not one of its endpoints", t.IP, t.Port, a)
		}
		at, uerr := untilAnswered(ctx, p, targets, []int{idx[k]}, 1)
		mu.Lock()
		defer mu.Unlock()
		c.Stragglers++
		c.FirstMiss = cmp.Or(c.FirstMiss, err)
		if uerr != nil {
			sweepErr = cmp.Or(sweepErr, uerr)
		}
		if at.After(c.At) {
			c.At = at
		}
	})
	c.SweepEnd = time.Now()
	if sweepErr != nil {
		return Converged{}, fmt.Errorf("%d targets after the sample: %w", c.Stragglers, sweepErr)
	}
	return c, nil
}

// Converged is what AllAnswer found.
type Converged struct {
	At         time.Time // the last target's first answer
	Sample     time.Time // the sample's last first answer
	SweepEnd   time.Time // when the sweep over the others ended (zero: no targets)
	Stragglers int       // targets the sweep found not answering yet: At may be theirs
	FirstMiss  error     // why the first of them did not answer
}

// untilAnswered probes targets[idx] round and round until each has answered from
// its endpoints, and returns when the last of them first did.
func untilAnswered(ctx context.Context, p *Prober, targets []Target, idx []int, workers int) (time.Time, error) {
	var mu sync.Mutex
	pending := map[int]bool{}
	for _, i := range idx {
		pending[i] = true
	}
	var last time.Time
	var lastErr error
	var used time.Duration // the CPU of the last round
	first := true
	for {
		mu.Lock()
		round := make([]int, 0, len(pending))
		for i := range pending {
			round = append(round, i)
		}
		mu.Unlock()
		if len(round) == 0 {
			return last, nil
		}
		if !first {
			// Leave the CPU to the proxy being measured.
			time.Sleep(max(roundPause, idleRounds*used))
		}
		first = false
		cpu0 := processCPU()
		if err := ctx.Err(); err != nil {
			return time.Time{}, fmt.Errorf("%d of %d never answered from their endpoints (last error %v): %w", len(round), len(idx), lastErr, err)
		}
		parallel(len(round), workers, func(k int) {
			t := targets[round[k]]
			a, _, err := p.Probe(t.IP, t.Port)
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				lastErr = err
			case !t.Serves(a):
				lastErr = fmt.Errorf("%s:%d answered from %s, not one of its endpoints", t.IP, t.Port, a)
			default:
				delete(pending, round[k])
				if now.After(last) {
					last = now
				}
			}
		})
		used = processCPU() - cpu0
	}
}

// parallel runs fn(0..n-1) on workers goroutines.
func parallel(n, workers int, fn func(int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				fn(k)
			}
		}()
	}
	for k := range n {
		next <- k
	}
	close(next)
	wg.Wait()
}

// Until probes t every pause until answer(a) holds for the endpoint that answered,
// and returns when it first did.
func Until(ctx context.Context, p *Prober, t Target, pause time.Duration, answer func(netip.Addr) bool) (time.Time, error) {
	var lastErr error
	for {
		a, _, err := p.Probe(t.IP, t.Port)
		now := time.Now()
		if err == nil && answer(a) {
			return now, nil
		}
		if err != nil {
			lastErr = err
		}
		if ctx.Err() != nil {
			return time.Time{}, fmt.Errorf("%s:%d: no answer as wanted (last error %v): %w", t.IP, t.Port, lastErr, ctx.Err())
		}
		time.Sleep(pause)
	}
}

// processCPU is the user and system time this process used so far.
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
