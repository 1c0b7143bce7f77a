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
// `..data` swap counts) differs from the one at start. Polling, as for
// --manifests: no inotify watch to lose when the link is replaced.
func WatchFile(ctx context.Context, cancel context.CancelCauseFunc, path string, every time.Duration) {
	stamp := func() string {
		info, err := os.Stat(path)
		if err != nil {
			return "error: " + err.Error()
		}
		return safefile.Stamp(info)
	}
	start := stamp()
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if stamp() != start {
					cancel(ErrChanged)
					return
				}
			}
		}
	}()
}
