package benchworld

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"
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
	roundPause = 5 * time.Millisecond
)

// AllAnswer returns when every target has answered from one of its own endpoints,
// and the time the last of them first did. A sweep over tens of thousands of
// targets takes seconds, which would be added to every measurement, so it first
// probes, round and round, a spread sample of targets (the first, the last and
// random ones: every transaction a proxy splits its sync into holds some) until all
// of them answered; then it sweeps every target once, and probes again those that
// did not answer yet until they do. The time returned is the later of the sample's
// and the stragglers' last first answer: traffic decides, never a proxy's word.
func AllAnswer(ctx context.Context, p *Prober, targets []Target, workers int) (time.Time, error) {
	if len(targets) == 0 {
		return time.Now(), nil
	}
	sample := map[int]bool{0: true, len(targets) - 1: true}
	for len(sample) < min(sentinels, len(targets)) {
		sample[rand.IntN(len(targets))] = true
	}
	var idx []int
	for i := range sample {
		idx = append(idx, i)
	}
	last, err := untilAnswered(ctx, p, targets, idx, workers)
	if err != nil {
		return time.Time{}, fmt.Errorf("sample: %w", err)
	}
	idx = idx[:0]
	for i := range targets {
		if !sample[i] {
			idx = append(idx, i)
		}
	}
	// The sweep: one probe each; those that answer were answering already.
	var mu sync.Mutex
	var missing []int
	parallel(len(idx), workers, func(k int) {
		t := targets[idx[k]]
		if a, _, err := p.Probe(t.IP, t.Port); err != nil || !t.Serves(a) {
			mu.Lock()
			missing = append(missing, idx[k])
			mu.Unlock()
		}
	})
	if len(missing) == 0 {
		return last, nil
	}
	stragglers, err := untilAnswered(ctx, p, targets, missing, workers)
	if err != nil {
		return time.Time{}, fmt.Errorf("%d targets after the sample: %w", len(missing), err)
	}
	return stragglers, nil // later than the sample's by construction
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
			time.Sleep(roundPause)
		}
		first = false
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
