package config

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/svcproxy/svcproxy/pkg/safefile"
)

// ErrChanged ends svcproxy when its --config file changes, as kube-proxy
// ends: the new configuration takes effect when the pod restarts.
var ErrChanged = errors.New("content of the proxy server's configuration file was updated")

// WatchFile cancels ctx with ErrChanged once path's content stamp
// (inode, size, mtime, mode; read through symlinks, so a ConfigMap volume's
// `..data` swap counts) differs from since, the stamp taken before the file was
// read (File.Stamp): a change between that read and the watch's start is a
// change too (it went unnoticed when the watch took its own first stamp, under
// load). Polling, as for --manifests: no inotify watch to lose when the link is
// replaced.
func WatchFile(ctx context.Context, cancel context.CancelCauseFunc, path, since string, every time.Duration) {
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if stampOf(path) != since {
					cancel(ErrChanged)
					return
				}
			}
		}
	}()
}

// stampOf is path's content stamp, or the error that stands in for it.
func stampOf(path string) string {
	info, err := os.Stat(path)
	if err != nil {
		return "error: " + err.Error()
	}
	return safefile.Stamp(info)
}
