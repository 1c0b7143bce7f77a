package proxy

import (
	"testing"

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
