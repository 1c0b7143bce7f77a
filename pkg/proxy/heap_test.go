package proxy

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
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

// TestPaceGC: a big sync runs the collector at bigSyncGCPercent and restores the
// pacing after; a lower one the user chose (or the collector off) stays.
func TestPaceGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	tests := []struct {
		name       string
		user       int
		wantDuring int
	}{
		{name: "default pacing", user: 100, wantDuring: bigSyncGCPercent},
		{name: "user pacing lower", user: 20, wantDuring: 20},
		{name: "collector off", user: -1, wantDuring: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(tc.user)
			restore := paceGC(bigSyncGCPercent)
			during := debug.SetGCPercent(-1)
			debug.SetGCPercent(during)
			restore()
			if after := debug.SetGCPercent(tc.user); after != tc.user {
				t.Fatalf("pacing after the sync %d, want %d restored", after, tc.user)
			}
			if during != tc.wantDuring {
				t.Fatalf("pacing during the sync %d, want %d", during, tc.wantDuring)
			}
		})
	}
}

// The cold start's element map is sized from elementsEstimate: for ClusterIP
// Services it must be what the render makes (a far smaller or larger guess would
// grow the map again, or hold memory nothing uses).
func TestElementsEstimate(t *testing.T) {
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	tr.OnServiceAdd(testService("web", "10.96.0.10", false, httpPort, dnsPort))
	tr.OnEndpointSliceAdd(testSlice("web", readyEP("pod1"), readyEP("pod2")))
	tr.OnServiceAdd(testService("sticky", "10.96.0.11", true, httpPort))
	tr.OnEndpointSliceAdd(testSlice("sticky", readyEP("pod3")))
	tr.OnServiceAdd(testService("empty", "10.96.0.12", false, httpPort))
	c := tr.TakeChanges()
	rendered := 0
	for k := range c.Changed {
		rendered += len(RenderService(c.Snapshot.ServicePortsOf(k), c.Snapshot, "node").Elements)
	}
	// web: 2 ports x (2 endpoints + 2 hairpin + dispatch + ClusterIP); sticky: 1 x
	// (1 + 1 + 2 + sticky port); empty: dispatch + ClusterIP.
	if rendered != 19 {
		t.Fatalf("rendered %d elements, want 19: the fixture changed", rendered)
	}
	// The estimate counts a sticky element for every port; only sticky ports have one.
	if got := elementsEstimate(c.Snapshot, c.Changed, endpoints.Place{Node: "node"}); got != 22 {
		t.Errorf("estimate %d, want 22 (19 rendered + 3 non-sticky ports)", got)
	}
	// Endpoints of another node have no hairpin element here (the fixture names none).
	for k, ports := range c.Snapshot.Services() {
		for _, sp := range ports {
			eps := c.Snapshot.Service(k).Endpoints(sp.Name)
			for i := range eps {
				eps[i] = eps[i].OnNode("elsewhere")
			}
		}
	}
	if got := elementsEstimate(c.Snapshot, c.Changed, endpoints.Place{Node: "node"}); got != 17 {
		t.Errorf("estimate %d, want 17 (22 less the 5 hairpin elements)", got)
	}
}

func TestWorthReleasing(t *testing.T) {
	for _, tc := range []struct {
		objects, elements int
		want              bool
	}{
		{objects: 500_000, elements: 480_000, want: true}, // a cold load
		{objects: 2_000, elements: 2_000},                 // small: no GC forced
		{objects: 40_000, elements: 480_000},              // catching up under churn at 30k
		{objects: 150_000, elements: 480_000, want: true}, // a third of the table rewritten
	} {
		if got := worthReleasing(tc.objects, tc.elements); got != tc.want {
			t.Errorf("worthReleasing(%d, %d) = %v, want %v", tc.objects, tc.elements, got, tc.want)
		}
	}
}
