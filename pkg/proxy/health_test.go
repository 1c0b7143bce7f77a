package proxy

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

// TestHealth pins /healthz and /livez to kube-proxy's answers (status code and exact
// JSON, as k8s.io/kubernetes pkg/proxy/healthcheck/proxy_health.go writes them).
func TestHealth(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const (
		at0  = `"2026-01-01T00:00:00Z"`
		at1  = `"2026-01-01T00:00:01Z"`
		at30 = `"2026-01-01T00:00:30Z"`
		at2m = `"2026-01-01T00:02:00Z"`
		atH  = `"2026-01-01T01:00:00Z"`
	)
	tests := []struct {
		name       string
		events     func(h *Health)
		now        time.Time
		ineligible bool
		// want: code and body of /healthz, then of /livez.
		healthzCode int
		healthz     string
		livezCode   int
		livez       string
	}{{
		name:        "before the sync loop starts",
		events:      func(h *Health) {},
		now:         t0,
		healthzCode: 200, healthz: `{"lastUpdated":` + at0 + `,"currentTime":` + at0 + `,"nodeEligible":true,"healthy":true}`,
		livezCode: 200, livez: `{"lastUpdated":` + at0 + `,"currentTime":` + at0 + `,"healthy":true}`,
	}, {
		name:        "first sync pending within timeout",
		events:      func(h *Health) { h.Synced(v4, t0); h.Queued(v4, t0) },
		now:         t0.Add(30 * time.Second),
		healthzCode: 200, healthz: `{"lastUpdated":` + at30 + `,"currentTime":` + at30 + `,"nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":` + at0 + `,"healthy":true}}}`,
		livezCode: 200, livez: `{"lastUpdated":` + at30 + `,"currentTime":` + at30 + `,"healthy":true,"status":{"IPv4":{"lastUpdated":` + at0 + `,"healthy":true}}}`,
	}, {
		name:        "synced, nothing pending",
		events:      func(h *Health) { h.Synced(v4, t0); h.Queued(v4, t0); h.Synced(v4, t0.Add(time.Second)) },
		now:         t0.Add(time.Hour),
		healthzCode: 200, healthz: `{"lastUpdated":` + atH + `,"currentTime":` + atH + `,"nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":` + at1 + `,"healthy":true}}}`,
		livezCode: 200, livez: `{"lastUpdated":` + atH + `,"currentTime":` + atH + `,"healthy":true,"status":{"IPv4":{"lastUpdated":` + at1 + `,"healthy":true}}}`,
	}, {
		name:        "change pending past timeout",
		events:      func(h *Health) { h.Synced(v4, t0); h.Queued(v4, t0.Add(time.Minute)) },
		now:         t0.Add(2 * time.Minute),
		healthzCode: 503, healthz: `{"lastUpdated":` + at0 + `,"currentTime":` + at2m + `,"nodeEligible":true,"healthy":false,"status":{"IPv4":{"lastUpdated":` + at0 + `,"healthy":false}}}`,
		livezCode: 503, livez: `{"lastUpdated":` + at0 + `,"currentTime":` + at2m + `,"healthy":false,"status":{"IPv4":{"lastUpdated":` + at0 + `,"healthy":false}}}`,
	}, {
		name:        "node not eligible: only /healthz fails",
		events:      func(h *Health) { h.Synced(v4, t0) },
		now:         t0.Add(time.Second),
		ineligible:  true,
		healthzCode: 503, healthz: `{"lastUpdated":` + at0 + `,"currentTime":` + at1 + `,"nodeEligible":false,"healthy":true,"status":{"IPv4":{"lastUpdated":` + at0 + `,"healthy":true}}}`,
		livezCode: 200, livez: `{"lastUpdated":` + at1 + `,"currentTime":` + at1 + `,"healthy":true,"status":{"IPv4":{"lastUpdated":` + at0 + `,"healthy":true}}}`,
	}, {
		name: "dual-stack: both families synced",
		events: func(h *Health) {
			h.Synced(v4, t0)
			h.Synced(v6, t0.Add(time.Second))
		},
		now:         t0.Add(30 * time.Second),
		healthzCode: 200, healthz: `{"lastUpdated":` + at30 + `,"currentTime":` + at30 + `,"nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":` + at0 + `,"healthy":true},"IPv6":{"lastUpdated":` + at1 + `,"healthy":true}}}`,
		livezCode: 200, livez: `{"lastUpdated":` + at30 + `,"currentTime":` + at30 + `,"healthy":true,"status":{"IPv4":{"lastUpdated":` + at0 + `,"healthy":true},"IPv6":{"lastUpdated":` + at1 + `,"healthy":true}}}`,
	}, {
		name: "dual-stack: one family stuck makes the node unhealthy",
		events: func(h *Health) {
			h.Synced(v4, t0)
			h.Synced(v6, t0.Add(time.Second))
			h.Queued(v6, t0.Add(time.Second))
			h.Queued(v4, t0.Add(time.Minute))
			h.Synced(v4, t0.Add(time.Minute))
		},
		now:         t0.Add(2 * time.Minute),
		healthzCode: 503, healthz: `{"lastUpdated":"2026-01-01T00:01:00Z","currentTime":` + at2m + `,"nodeEligible":true,"healthy":false,"status":{"IPv4":{"lastUpdated":"2026-01-01T00:01:00Z","healthy":true},"IPv6":{"lastUpdated":` + at1 + `,"healthy":false}}}`,
		livezCode: 503, livez: `{"lastUpdated":"2026-01-01T00:01:00Z","currentTime":` + at2m + `,"healthy":false,"status":{"IPv4":{"lastUpdated":"2026-01-01T00:01:00Z","healthy":true},"IPv6":{"lastUpdated":` + at1 + `,"healthy":false}}}`,
	}, {
		// svcproxy's own rule: a resync that cannot repair the kernel (no
		// Service changed, nothing queued) makes the proxy unhealthy once the
		// failures have lasted the timeout; kube-proxy stays healthy here.
		name: "syncs failing past timeout with nothing queued",
		events: func(h *Health) {
			h.Synced(v4, t0)
			h.Failed(v4, t0.Add(time.Minute))
			h.Failed(v4, t0.Add(90*time.Second))
		},
		now:         t0.Add(2 * time.Minute),
		healthzCode: 503, healthz: `{"lastUpdated":` + at0 + `,"currentTime":` + at2m + `,"nodeEligible":true,"healthy":false,"status":{"IPv4":{"lastUpdated":` + at0 + `,"healthy":false}}}`,
		livezCode: 503, livez: `{"lastUpdated":` + at0 + `,"currentTime":` + at2m + `,"healthy":false,"status":{"IPv4":{"lastUpdated":` + at0 + `,"healthy":false}}}`,
	}, {
		name:        "syncs failing within timeout",
		events:      func(h *Health) { h.Synced(v4, t0); h.Failed(v4, t0.Add(90*time.Second)) },
		now:         t0.Add(2 * time.Minute),
		healthzCode: 200, healthz: `{"lastUpdated":` + at2m + `,"currentTime":` + at2m + `,"nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":` + at0 + `,"healthy":true}}}`,
		livezCode: 200, livez: `{"lastUpdated":` + at2m + `,"currentTime":` + at2m + `,"healthy":true,"status":{"IPv4":{"lastUpdated":` + at0 + `,"healthy":true}}}`,
	}, {
		name: "a successful sync after failures clears them",
		events: func(h *Health) {
			h.Synced(v4, t0)
			h.Failed(v4, t0.Add(time.Second))
			h.Synced(v4, t0.Add(30*time.Second))
		},
		now:         t0.Add(2 * time.Minute),
		healthzCode: 200, healthz: `{"lastUpdated":` + at2m + `,"currentTime":` + at2m + `,"nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":` + at30 + `,"healthy":true}}}`,
		livezCode: 200, livez: `{"lastUpdated":` + at2m + `,"currentTime":` + at2m + `,"healthy":true,"status":{"IPv4":{"lastUpdated":` + at30 + `,"healthy":true}}}`,
	}, {
		name: "failures after a success count from the first new failure",
		events: func(h *Health) {
			h.Synced(v4, t0)
			h.Failed(v4, t0.Add(time.Second))
			h.Synced(v4, t0.Add(30*time.Second))
			h.Failed(v4, t0.Add(time.Minute))
		},
		now:         t0.Add(2 * time.Minute),
		healthzCode: 503, healthz: `{"lastUpdated":` + at30 + `,"currentTime":` + at2m + `,"nodeEligible":true,"healthy":false,"status":{"IPv4":{"lastUpdated":` + at30 + `,"healthy":false}}}`,
		livezCode: 503, livez: `{"lastUpdated":` + at30 + `,"currentTime":` + at2m + `,"healthy":false,"status":{"IPv4":{"lastUpdated":` + at30 + `,"healthy":false}}}`,
	}, {
		name: "dual-stack: one family failing makes the node unhealthy",
		events: func(h *Health) {
			h.Synced(v4, t0)
			h.Synced(v6, t0)
			h.Failed(v6, t0.Add(time.Second))
			h.Synced(v4, t0.Add(time.Minute))
		},
		now:         t0.Add(2 * time.Minute),
		healthzCode: 503, healthz: `{"lastUpdated":"2026-01-01T00:01:00Z","currentTime":` + at2m + `,"nodeEligible":true,"healthy":false,"status":{"IPv4":{"lastUpdated":"2026-01-01T00:01:00Z","healthy":true},"IPv6":{"lastUpdated":` + at0 + `,"healthy":false}}}`,
		livezCode: 503, livez: `{"lastUpdated":"2026-01-01T00:01:00Z","currentTime":` + at2m + `,"healthy":false,"status":{"IPv4":{"lastUpdated":"2026-01-01T00:01:00Z","healthy":true},"IPv6":{"lastUpdated":` + at0 + `,"healthy":false}}}`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &Health{Timeout: time.Minute, Now: func() time.Time { return tc.now }, Metrics: NewMetrics(nil)}
			if tc.ineligible {
				h.SetNodeEligible(func() bool { return false })
			}
			tc.events(h)
			// Healthy is /livez's answer: the health check node ports'
			// serviceProxyHealthy ignores node eligibility, as kube-proxy's.
			if got := h.Healthy(); got != (tc.livezCode == 200) {
				t.Errorf("Healthy() = %v, want %v", got, tc.livezCode == 200)
			}
			for _, c := range []struct {
				path, body string
				code       int
			}{{"/healthz", tc.healthz, tc.healthzCode}, {"/livez", tc.livez, tc.livezCode}} {
				rec := httptest.NewRecorder()
				h.Handler().ServeHTTP(rec, httptest.NewRequest("GET", c.path, nil))
				if rec.Code != c.code || rec.Body.String() != c.body {
					t.Errorf("%s = %d %s\nwant %d %s", c.path, rec.Code, rec.Body, c.code, c.body)
				}
				if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
					t.Errorf("%s: Content-Type %q", c.path, ct)
				}
			}
		})
	}
}

const (
	v4 = endpoints.IPv4
	v6 = endpoints.IPv6
)

// Refused Services of both families show in one sorted list.
func TestHealthRefusedBothFamilies(t *testing.T) {
	h := &Health{Timeout: time.Minute}
	h.SetRefused(v6, []Refusal{{Service: "ns/b", Reason: "v6"}})
	h.SetRefused(v4, []Refusal{{Service: "ns/a", Reason: "v4"}, {Service: "ns/c", Reason: "v4"}})
	shown, total := h.refusedServices()
	if total != 3 || len(shown) != 3 || shown[0].Service != "ns/a" || shown[1].Service != "ns/b" || shown[2].Service != "ns/c" {
		t.Fatalf("refused = %v (%d), want ns/a, ns/b, ns/c", shown, total)
	}
	h.SetRefused(v6, nil)
	if _, total := h.refusedServices(); total != 2 {
		t.Fatalf("after IPv6 cleared its list: %d refused, want 2", total)
	}
}

// A Health without metrics (tests, tools) still answers.
func TestHealthWithoutMetrics(t *testing.T) {
	rec := httptest.NewRecorder()
	(&Health{Timeout: time.Minute}).Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/livez", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("/livez = %d", rec.Code)
	}
}
