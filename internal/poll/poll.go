// Package poll waits for a condition by asking it again and again: the one
// polling helper of the unit tests, kernel tests, bench and e2e suite.
package poll

import (
	"context"
	"fmt"
	"time"
)

// Until calls cond every interval until it reports true, timeout passes or
// ctx ends. The error carries cond's last message.
func Until(ctx context.Context, timeout, interval time.Duration, cond func() (bool, string)) error {
	return UntilOrAbort(ctx, timeout, interval, func() (bool, string, error) {
		ok, msg := cond()
		return ok, msg, nil
	})
}

// UntilOrAbort is Until with a condition that can give up early by returning
// an error (say, a process it waits for has exited); that error is returned
// as is.
func UntilOrAbort(ctx context.Context, timeout, interval time.Duration, cond func() (bool, string, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, msg, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("timed out after %v: %s", timeout, msg)
		}
		// Never sleep past the deadline: one last look at it.
		wait := time.NewTimer(min(interval, time.Until(deadline)+time.Millisecond))
		select {
		case <-ctx.Done():
			wait.Stop()
			return fmt.Errorf("%w: %s", ctx.Err(), msg)
		case <-wait.C:
		}
	}
}

// NoError adapts a condition that reports what is still wrong as an error
// (nil when it holds).
func NoError(f func() error) func() (bool, string) {
	return func() (bool, string) {
		if err := f(); err != nil {
			return false, err.Error()
		}
		return true, ""
	}
}
