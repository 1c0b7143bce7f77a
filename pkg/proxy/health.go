package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Health answers kube-proxy's /healthz and /livez with kube-proxy's status codes and
// JSON (k8s.io/kubernetes pkg/proxy/healthcheck/proxy_health.go): healthy unless a
// change has been waiting longer than Timeout without a successful sync; /healthz
// also needs the node to be eligible. A Service the kernel refuses is such a change;
// /healthz lists the refused Services with the kernel's reason in two fields of its
// own, which kube-proxy's clients (JSON decoders, or the status code alone) ignore.
type Health struct {
	Timeout time.Duration
	Metrics *Metrics
	Now     func() time.Time

	mu sync.Mutex
	// nodeEligible reports whether this node should get traffic from load
	// balancers (nil: always); see SetNodeEligible.
	nodeEligible func() bool
	lastUpdated  time.Time // zero until the sync loop starts
	oldestQueue  time.Time // zero when nothing is pending
	refused      []Refusal
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

// SetNodeEligible sets how /healthz learns whether the node is eligible for
// traffic: kube-proxy says no while its Node object is unknown, being deleted or
// tainted ToBeDeletedByClusterAutoscaler.
func (h *Health) SetNodeEligible(f func() bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nodeEligible = f
}

func (h *Health) eligible() bool {
	h.mu.Lock()
	f := h.nodeEligible
	h.mu.Unlock()
	return f == nil || f()
}

// Queued records that a sync was requested.
func (h *Health) Queued(t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.oldestQueue.IsZero() {
		h.oldestQueue = t
	}
}

// Synced records a successful sync, and the start of the sync loop: kube-proxy
// counts that as an update so that a first sync that never succeeds shows.
func (h *Health) Synced(t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastUpdated, h.oldestQueue = t, time.Time{}
}

// familyHealth is one entry of the body's "status" map.
type familyHealth struct {
	LastUpdated time.Time `json:"lastUpdated"`
	Healthy     bool      `json:"healthy"`
}

// healthJSON is kube-proxy's ProxyHealth, plus svcproxy's refused Services.
type healthJSON struct {
	LastUpdated          time.Time               `json:"lastUpdated"`
	CurrentTime          time.Time               `json:"currentTime"`
	NodeEligible         *bool                   `json:"nodeEligible,omitempty"`
	Healthy              bool                    `json:"healthy"`
	Status               map[string]familyHealth `json:"status,omitempty"`
	RefusedServices      []Refusal               `json:"refusedServices,omitempty"`
	RefusedServicesTotal int                     `json:"refusedServicesTotal,omitempty"`
}

// health is kube-proxy's ProxyHealthServer.Health for one IP family: healthy
// until the loop has started and then while no change waits past Timeout.
func (h *Health) health(now time.Time) healthJSON {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := healthJSON{LastUpdated: h.lastUpdated, CurrentTime: now, Healthy: true}
	if h.lastUpdated.IsZero() {
		return b
	}
	b.Healthy = h.oldestQueue.IsZero() || now.Sub(h.oldestQueue) < h.Timeout
	b.Status = map[string]familyHealth{ipFamily: {LastUpdated: h.lastUpdated, Healthy: b.Healthy}}
	return b
}

// Healthy is the proxy's own health, what /livez answers: no change has waited
// past Timeout. The health check node ports report it as serviceProxyHealthy;
// like kube-proxy's, it leaves out whether the node is eligible.
func (h *Health) Healthy() bool { return h.health(h.now()).Healthy }

// Handler serves /healthz and /livez.
func (h *Health) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { h.serve(w, true) })
	mux.HandleFunc("/livez", func(w http.ResponseWriter, r *http.Request) { h.serve(w, false) })
	return mux
}

func (h *Health) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

func (h *Health) serve(w http.ResponseWriter, healthz bool) {
	b := h.health(h.now())
	healthy := b.Healthy
	if healthz {
		eligible := h.eligible()
		b.NodeEligible = &eligible
		healthy = healthy && eligible
		if shown, total := h.refusedServices(); total > 0 {
			b.RefusedServices, b.RefusedServicesTotal = shown, total
		}
	}
	code := http.StatusOK
	if healthy {
		// As kube-proxy: a healthy answer says the rules are current now.
		b.LastUpdated = h.now()
	} else {
		code = http.StatusServiceUnavailable
	}
	if h.Metrics != nil {
		counter := h.Metrics.LivezTotal
		if healthz {
			counter = h.Metrics.HealthzTotal
		}
		counter.WithLabelValues(fmt.Sprint(code)).Inc()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	out, _ := json.Marshal(b)
	_, _ = w.Write(out)
}
