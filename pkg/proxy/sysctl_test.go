package proxy

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// TestRouteLocalnetOnlyThroughSetSysctl: with localhost NodePorts each sync asks
// SetSysctl for route_localnet=1; without SetSysctl nothing is written (a fake kernel
// must never change the test machine's own namespace); without localhost NodePorts
// nothing is asked.
func TestRouteLocalnetOnlyThroughSetSysctl(t *testing.T) {
	for _, tc := range []struct {
		name      string
		localhost bool
		want      int
	}{{"localhost NodePorts", true, 2}, {"off", false, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			var calls []string
			p := New(Config{Tracker: endpoints.NewTracker(endpoints.TrackerOptions{}), Kernel: nft.NewFake(),
				Options:   Options{LocalhostNodePorts: tc.localhost},
				SetSysctl: func(path, value string) error { calls = append(calls, path+"="+value); return nil }})
			for i := 0; i < 2; i++ {
				if err := p.Sync(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if len(calls) != tc.want || (tc.want > 0 && calls[0] != "/proc/sys/net/ipv4/conf/all/route_localnet=1") {
				t.Fatalf("SetSysctl calls %v, want %d of route_localnet=1", calls, tc.want)
			}
		})
	}
	p := New(Config{Tracker: endpoints.NewTracker(endpoints.TrackerOptions{}), Kernel: nft.NewFake(), Options: Options{LocalhostNodePorts: true}})
	if err := p.Sync(t.Context()); err != nil {
		t.Fatalf("without SetSysctl: %v", err)
	}
}

// TestWriteProcSysUnder: a /proc/sys path lands under the directory where the
// node's /proc/sys is mounted, and is written only when it differs.
func TestWriteProcSysUnder(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "net/ipv4/conf/all/route_localnet")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	set := WriteProcSysUnder(dir + "/")
	if err := set(sysctlRouteLocalnet, "1"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != "1" {
		t.Errorf("route_localnet under %s = %q, want 1", dir, b)
	}
	if err := set("/etc/passwd", "x"); err == nil {
		t.Error("a path outside /proc/sys was written")
	}
	// Root writes a read-only file anyway: an old mtime that stays old shows
	// that a value already held is not written again.
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(file, old, old); err != nil {
		t.Fatal(err)
	}
	if err := set(sysctlRouteLocalnet, "1"); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(file); err != nil || !st.ModTime().Equal(old) {
		t.Errorf("a value held already was written again (mtime %v, %v)", st.ModTime(), err)
	}
}
