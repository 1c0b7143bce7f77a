package poll

import (
	"context"
	"testing"
	"time"
)

// Interval is how often Eventually asks.
const Interval = 50 * time.Millisecond

// Eventually polls cond every Interval and fails the test (Fatalf) with what
// and cond's last message when it does not hold within timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	if err := Until(context.Background(), timeout, Interval, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
