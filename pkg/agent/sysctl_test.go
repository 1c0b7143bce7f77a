package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
)

func TestTolerateReadOnlyProcSys(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		wantErr bool
	}{
		{name: "written", err: nil},
		{name: "read-only /proc/sys, as in an unprivileged pod", err: &fs.PathError{Op: "open", Path: "/proc/sys/net/ipv4/conf/all/route_localnet", Err: syscall.EROFS}},
		{name: "wrapped read-only", err: fmt.Errorf("write: %w", syscall.EROFS)},
		{name: "permission denied still fails", err: &fs.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, wantErr: true},
		{name: "other errors still fail", err: errors.New("boom"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			set := tolerateReadOnlyProcSys(func(string, string) error { calls++; return tc.err })
			for i := 0; i < 2; i++ {
				if err := set("/proc/sys/net/ipv4/conf/all/route_localnet", "1"); (err != nil) != tc.wantErr {
					t.Fatalf("call %d: err = %v, want error %v", i, err, tc.wantErr)
				}
			}
			if calls != 2 {
				t.Errorf("writer called %d times, want 2 (every sync tries again)", calls)
			}
		})
	}
}
