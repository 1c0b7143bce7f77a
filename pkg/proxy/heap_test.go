package proxy

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestBoundHeap: a chunked sync lowers the soft memory limit to about the live heap
// and restores it after; a lower limit the user set stays.
func TestBoundHeap(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	tests := []struct {
		name      string
		user      int64
		wantBound bool
	}{
		{name: "no user limit", user: math.MaxInt64, wantBound: true},
		{name: "user limit lower than the bound", user: 1 << 20, wantBound: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(tc.user)
			restore := boundHeap(64 << 20)
			during := debug.SetMemoryLimit(-1)
			restore()
			if after := debug.SetMemoryLimit(-1); after != tc.user {
				t.Fatalf("limit after the sync %d, want %d restored", after, tc.user)
			}
			if bound := during < tc.user; bound != tc.wantBound {
				t.Fatalf("limit during the sync %d (user %d): bounded %v, want %v", during, tc.user, bound, tc.wantBound)
			}
			if tc.wantBound && during > 1<<30 {
				t.Fatalf("limit during the sync %d: not near this test's heap", during)
			}
		})
	}
}
