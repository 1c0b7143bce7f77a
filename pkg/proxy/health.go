package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Health answers kube-proxy's /healthz and /livez: healthy unless a change has been
// waiting longer than Timeout without a successful sync. A Service the kernel refuses
// is such a change; /healthz lists the refused Services with the kernel's reason.
type Health struct {
	Timeout time.Duration
	Metrics *Metrics
	Now     func() time.Time

	mu          sync.Mutex
	lastUpdated time.Time
	oldestQueue time.Time // zero when nothing is pending
	refused     []Refusal
}

// Refusal is a Service whose rules the kernel refuses, with the kernel's reason.
type Refusal struct {
	Service string `json:"service"`
	Reason  string `json:"reason"`
}

// maxRefusalsShown bounds the list in the /healthz body.
const maxRefusalsShown = 20

// SetRefused records the Services the kernel refuses now (sorted).
func (h *Health) SetRefused(list []Refusal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refused = list
}

func (h *Health) refusedServices() (shown []Refusal, total int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refused[:min(len(h.refused), maxRefusalsShown)], len(h.refused)
}

// Queued records that a sync was requested.
func (h *Health) Queued(t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.oldestQueue.IsZero() {
		h.oldestQueue = t
	}
}

// Synced records a successful sync.
func (h *Health) Synced(t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastUpdated, h.oldestQueue = t, time.Time{}
}

func (h *Health) healthy(now time.Time) (bool, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lastUpdated.IsZero() {
		return false, h.lastUpdated // like kube-proxy: not healthy before the first sync
	}
	return h.oldestQueue.IsZero() || now.Sub(h.oldestQueue) <= h.Timeout, h.lastUpdated
}

// Handler serves /healthz and /livez.
func (h *Health) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { h.serve(w, "healthz") })
	mux.HandleFunc("/livez", func(w http.ResponseWriter, r *http.Request) { h.serve(w, "livez") })
	return mux
}

func (h *Health) serve(w http.ResponseWriter, which string) {
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	t := now()
	ok, last := h.healthy(t)
	code := http.StatusOK
	if !ok {
		code = http.StatusServiceUnavailable
	}
	if h.Metrics != nil {
		c := h.Metrics.HealthzTotal
		if which == "livez" {
			c = h.Metrics.LivezTotal
		}
		c.WithLabelValues(fmt.Sprint(code)).Inc()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	body := map[string]any{"lastUpdated": last.String(), "currentTime": t.String()}
	if which == "healthz" {
		body["nodeEligible"] = true
		if shown, total := h.refusedServices(); total > 0 {
			body["refusedServices"] = shown
			body["refusedServicesTotal"] = total
		}
	}
	_ = json.NewEncoder(w).Encode(body)
}
