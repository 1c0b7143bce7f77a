package takeover

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/poll"
)

// TestAfterSyncRetries: the hook runs the takeover in the background after a
// sync, never twice at once, tries a failing one again after later syncs up to
// syncAttempts times, and stops once one succeeds.
func TestAfterSyncRetries(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failFirst int32 // runs that fail before one succeeds
		wantRuns  int32
	}{
		{name: "succeeds at once", failFirst: 0, wantRuns: 1},
		{name: "succeeds on the third try", failFirst: 2, wantRuns: 3},
		{name: "always fails: gives up", failFirst: 100, wantRuns: syncAttempts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			hook := afterSync(t.Context(), func(context.Context) error {
				if runs.Add(1) <= tc.failFirst {
					return errors.New("the kernel will not delete it")
				}
				return nil
			})
			// Syncs keep coming; each may start a run once the last has ended.
			poll.Eventually(t, 5*time.Second, "the takeover to settle", func() (bool, string) {
				hook()
				return runs.Load() >= tc.wantRuns, fmt.Sprint("runs so far: ", runs.Load())
			})
			for range 20 {
				hook()
				time.Sleep(time.Millisecond)
			}
			if n := runs.Load(); n != tc.wantRuns {
				t.Errorf("%d runs, want %d", n, tc.wantRuns)
			}
		})
	}
}
