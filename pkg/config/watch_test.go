package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWatchFile: a change of the --config file, written in place or swapped
// in the way a ConfigMap volume swaps `..data`, ends the run with ErrChanged;
// an untouched file does not. The watch compares with the stamp Load took, so a
// change between the read and the watch's start counts.
func TestWatchFile(t *testing.T) {
	for _, tc := range []struct {
		name   string
		early  bool // change before WatchFile starts
		change func(t *testing.T, dir string)
	}{
		{name: "untouched"},
		{name: "written before the watch started", early: true, change: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "data1", "config.conf"), "mode: nftables\n")
		}},
		{name: "written in place", change: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "data1", "config.conf"), "mode: nftables\n")
		}},
		{name: "ConfigMap ..data swap", change: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "data2", "config.conf"), "mode: iptables\n") // same size, new inode
			must(t, os.Symlink("data2", filepath.Join(dir, "..data_tmp")))
			must(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The ConfigMap volume layout: config.conf -> ..data/config.conf, ..data -> data1.
			dir := t.TempDir()
			write(t, filepath.Join(dir, "data1", "config.conf"), configHeader+"mode: iptables\n")
			must(t, os.Symlink("data1", filepath.Join(dir, "..data")))
			must(t, os.Symlink("..data/config.conf", filepath.Join(dir, "config.conf")))
			f, err := Load(filepath.Join(dir, "config.conf"))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			if tc.early {
				time.Sleep(10 * time.Millisecond) // a new mtime
				tc.change(t, dir)
			}
			WatchFile(ctx, cancel, filepath.Join(dir, "config.conf"), f.Stamp, 10*time.Millisecond)
			time.Sleep(30 * time.Millisecond)
			if tc.change != nil && !tc.early {
				tc.change(t, dir)
			}
			select {
			case <-ctx.Done():
				if tc.change == nil || !errors.Is(context.Cause(ctx), ErrChanged) {
					t.Fatalf("ended with %v", context.Cause(ctx))
				}
			case <-time.After(500 * time.Millisecond):
				if tc.change != nil {
					t.Fatal("the change went unnoticed")
				}
			}
		})
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(path), 0o755))
	must(t, os.WriteFile(path, []byte(content), 0o644))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
