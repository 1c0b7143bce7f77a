package proxy

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestHealth(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		events func(h *Health)
		now    time.Time
		want   int
	}{
		{"before the first sync", func(h *Health) { h.Queued(t0) }, t0.Add(time.Second), http.StatusServiceUnavailable},
		{"synced, nothing pending", func(h *Health) { h.Queued(t0); h.Synced(t0.Add(time.Second)) }, t0.Add(time.Hour), http.StatusOK},
		{"change pending within timeout", func(h *Health) { h.Synced(t0); h.Queued(t0.Add(time.Second)) }, t0.Add(30 * time.Second), http.StatusOK},
		{"change pending past timeout", func(h *Health) { h.Synced(t0); h.Queued(t0.Add(time.Second)) }, t0.Add(2 * time.Minute), http.StatusServiceUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &Health{Timeout: time.Minute, Now: func() time.Time { return tc.now }, Metrics: NewMetrics(nil)}
			tc.events(h)
			for _, path := range []string{"/healthz", "/livez"} {
				rec := httptest.NewRecorder()
				h.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
				if rec.Code != tc.want {
					t.Fatalf("%s = %d, want %d (%s)", path, rec.Code, tc.want, rec.Body)
				}
			}
		})
	}
}
