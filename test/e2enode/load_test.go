//go:build e2enode

package e2enode

import (
	"fmt"
	"sync"
	"time"
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
	at  time.Time
	err error
}

func startLoad(clients []string, addr string, interval time.Duration) *load {
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
				_, err := getFrom(client, addr, 2*time.Second)
				l.mu.Lock()
				l.res[client] = append(l.res[client], result{at, err})
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// finish stops the load and summarises it per client: requests, failures
// (with the first few errors) and the longest stretch without a success.
func (l *load) finish() (lines []string, failed int) {
	close(l.stop)
	l.wg.Wait()
	for client, rs := range l.res {
		var f int
		var errs []string
		var gap time.Duration
		last := time.Time{}
		for _, r := range rs {
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
		lines = append(lines, fmt.Sprintf("client=%s requests=%d failed=%d longest_gap_ms=%d %v", client, len(rs), f, gap.Milliseconds(), errs))
	}
	return lines, failed
}
