package poll

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestUntilOrAbort(t *testing.T) {
	abort := errors.New("process exited")
	tests := []struct {
		name      string
		timeout   time.Duration
		holdAfter int   // cond holds from this call on (0: never)
		abortAt   int   // cond returns abort at this call (0: never)
		cancel    bool  // ctx is cancelled before the call
		wantErr   error // errors.Is target; nil: success
		wantMsg   string
		wantCalls int
	}{
		{name: "holds at once", timeout: time.Second, holdAfter: 1, wantCalls: 1},
		{name: "holds on the third call", timeout: time.Second, holdAfter: 3, wantCalls: 3},
		{name: "times out with the last message", timeout: 30 * time.Millisecond, wantMsg: "timed out after 30ms: call"},
		{name: "aborts", timeout: time.Second, abortAt: 2, wantErr: abort, wantCalls: 2},
		{name: "context ends", timeout: time.Second, cancel: true, wantErr: context.Canceled, wantCalls: 1},
		{name: "zero timeout asks once", timeout: 0, holdAfter: 1, wantCalls: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			calls := 0
			err := UntilOrAbort(ctx, tc.timeout, 5*time.Millisecond, func() (bool, string, error) {
				calls++
				if tc.abortAt > 0 && calls == tc.abortAt {
					return false, "", abort
				}
				return tc.holdAfter > 0 && calls >= tc.holdAfter, fmt.Sprintf("call %d", calls), nil
			})
			switch {
			case tc.wantMsg != "":
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantMsg) {
					t.Fatalf("err = %v, want prefix %q", err, tc.wantMsg)
				}
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
			case err != nil:
				t.Fatalf("err = %v, want nil", err)
			}
			if tc.wantCalls > 0 && calls != tc.wantCalls {
				t.Errorf("cond called %d times, want %d", calls, tc.wantCalls)
			}
		})
	}
}

func TestUntilRespectsTimeout(t *testing.T) {
	start := time.Now()
	err := Until(context.Background(), 50*time.Millisecond, time.Hour, func() (bool, string) { return false, "never" })
	if err == nil || !strings.Contains(err.Error(), "never") {
		t.Fatalf("err = %v, want a timeout naming the last message", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("an interval longer than the timeout kept Until waiting %v", took)
	}
}

func TestNoError(t *testing.T) {
	for _, tc := range []struct {
		err    error
		ok     bool
		wanted string
	}{{nil, true, ""}, {errors.New("status 503"), false, "status 503"}} {
		ok, msg := NoError(func() error { return tc.err })()
		if ok != tc.ok || msg != tc.wanted {
			t.Errorf("NoError(%v) = %v, %q; want %v, %q", tc.err, ok, msg, tc.ok, tc.wanted)
		}
	}
}

// fatalRecorder is a testing.TB whose Fatalf records instead of stopping.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper()                        {}
func (f *fatalRecorder) Fatalf(format string, a ...any) { f.msg = fmt.Sprintf(format, a...) }

func TestEventually(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	Eventually(rec, 20*time.Millisecond, "healthz 200", func() (bool, string) { return false, "status 503" })
	if !strings.HasPrefix(rec.msg, "healthz 200: timed out after 20ms: status 503") {
		t.Errorf("Fatalf message %q", rec.msg)
	}
	rec = &fatalRecorder{TB: t}
	Eventually(rec, time.Second, "holds", func() (bool, string) { return true, "" })
	if rec.msg != "" {
		t.Errorf("Eventually failed a condition that holds: %q", rec.msg)
	}
}
