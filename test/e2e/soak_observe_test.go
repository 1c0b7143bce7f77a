//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/svcproxy/svcproxy/internal/netns"
)

// healthChange is /healthz's answer changing: code 0 is no answer (the
// proxy is down or restarting).
type healthChange struct {
	at   time.Time
	code int
}

// healthLog polls one node's /healthz every 100 ms and keeps the changes,
// with their times: the invariant compares them with the windows in which
// the kernel was known wrong.
type healthLog struct {
	mu      sync.Mutex
	changes []healthChange
}

func (h *healthLog) record(code int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.changes) == 0 || h.changes[len(h.changes)-1].code != code {
		h.changes = append(h.changes, healthChange{at: time.Now(), code: code})
	}
}

// resSample is one reading of a proxy's RSS (/proc) and goroutines (its
// metrics endpoint's go_goroutines; -1 when the scrape failed).
type resSample struct {
	at         time.Time
	node       string
	pid        int
	rssKiB     int
	goroutines float64
}

type resourceSampler struct {
	mu      sync.Mutex
	samples []resSample
}

// observe starts the pollers: /healthz per node, and RSS and goroutines of
// every proxy every 5 s.
func (s *soak) observe() {
	s.health = map[string]*healthLog{}
	s.res = &resourceSampler{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, n := range s.c.nodes {
		h := &healthLog{}
		s.health[n.name] = h
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &http.Client{
				Transport: &http.Transport{DialContext: netns.DialFunc(n.netns, 300*time.Millisecond), DisableKeepAlives: true},
				Timeout:   500 * time.Millisecond,
			}
			for {
				h.record(getHealth(hc, "/healthz").code)
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			for _, n := range s.c.nodes {
				n.mu.Lock()
				pid := n.proxy.pid()
				n.mu.Unlock()
				rss, err := rssKiB(pid)
				if err != nil {
					continue // restarting
				}
				g := -1.0
				if m, err := s.c.scrape(n); err == nil {
					if v, ok := m["go_goroutines"]; ok {
						g = v
					}
				}
				s.res.mu.Lock()
				s.res.samples = append(s.res.samples, resSample{at: time.Now(), node: n.name, pid: pid, rssKiB: rss, goroutines: g})
				s.res.mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Second):
			}
		}
	}()
	var once sync.Once
	s.stopObs = func() {
		once.Do(func() { close(stop) })
		wg.Wait()
	}
}

func (s *soak) stopObserving() { s.stopObs() }

// panicLine matches what a Go program prints when it panics or dies of a
// fatal runtime error.
var panicLine = regexp.MustCompile(`^(panic: |fatal error: |goroutine \d+ \[running\]:)`)

// panics scans every proxy log of the run (restarts append to the same
// file) for a panic, and returns "file:line: text" for each.
func (s *soak) panics() []string {
	files, _ := filepath.Glob(filepath.Join(s.c.logDir, "proxy-*.log"))
	sort.Strings(files)
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", filepath.Base(f), err))
			continue
		}
		line := 1
		start := 0
		for i, ch := range b {
			if ch != '\n' {
				continue
			}
			if l := string(b[start:i]); panicLine.MatchString(l) {
				out = append(out, fmt.Sprintf("%s:%d: %s", filepath.Base(f), line, l))
			}
			line++
			start = i + 1
		}
	}
	return out
}
