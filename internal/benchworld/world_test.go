package benchworld

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"
)

func newWorld(t *testing.T) *World {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces")
	}
	w, err := New(fmt.Sprintf("spbw%d-", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

// Without any proxy, every endpoint address answers with itself (the pods
// namespace owns the prefix), and an address nothing translates fails at once.
func TestWorldAnswersAndRefuses(t *testing.T) {
	w := newWorld(t)
	p := w.NewProber(2 * time.Second)
	defer p.Close()
	checkProbes(t, p, []probeCase{
		{"10.128.0.1", Port, true},
		{"10.150.3.4", Port, true},
		{"10.191.255.254", Port, true},
		{"10.96.4.0", 80, false},  // a ClusterIP no proxy translates
		{"10.128.0.1", 81, false}, // nothing listens: refused
	})
}

// probeCase is one probe and whether it must be answered (by the address itself).
type probeCase struct {
	addr    string
	port    int
	answers bool
}

// checkProbes probes each case: an answer must come from the address itself, a
// failure at once rather than after a timeout.
func checkProbes(t *testing.T, p *Prober, cases []probeCase) {
	t.Helper()
	for _, tc := range cases {
		a := netip.MustParseAddr(tc.addr)
		start := time.Now()
		got, _, err := p.Probe(a, tc.port)
		took := time.Since(start)
		switch {
		case tc.answers && err != nil:
			t.Errorf("%s:%d: %v, want an answer", a, tc.port, err)
		case tc.answers && got != a:
			t.Errorf("%s:%d answered as %s, want itself", a, tc.port, got)
		case !tc.answers && err == nil:
			t.Errorf("%s:%d answered %s, want a failure", a, tc.port, got)
		case !tc.answers && took > 500*time.Millisecond:
			t.Errorf("%s:%d failed after %v: want at once, not a timeout", a, tc.port, took)
		}
	}
}

func TestAllAnswer(t *testing.T) {
	w := newWorld(t)
	p := w.NewProber(time.Second)
	defer p.Close()
	var targets []Target
	for i := range 300 {
		a := netip.MustParseAddr("10.128.1.0").Next()
		for range i {
			a = a.Next()
		}
		targets = append(targets, Target{IP: a, Port: Port, Serves: func(got netip.Addr) bool { return got == a }})
	}
	start := time.Now()
	c, err := AllAnswer(context.Background(), p, targets, 2)
	if err != nil {
		t.Fatal(err)
	}
	if c.At.Before(start) || time.Since(c.At) < 0 {
		t.Errorf("last answer at %v, outside the call (%v..now)", c.At, start)
	}
	if c.Stragglers != 0 || c.At != c.Sample || c.SweepEnd.Before(c.Sample) {
		t.Errorf("every target answering from the start: got %+v, want no stragglers and the sample's time", c)
	}

	// One target whose answers are never its endpoints: never done.
	targets[150].Serves = func(netip.Addr) bool { return false }
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := AllAnswer(ctx, p, targets, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a target answered by others: err %v, want the deadline", err)
	}
}
