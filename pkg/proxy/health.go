package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

// Health answers kube-proxy's /healthz and /livez with kube-proxy's status codes and
// JSON (k8s.io/kubernetes pkg/proxy/healthcheck/proxy_health.go): healthy unless a
// change has been waiting longer than Timeout without a successful sync, or, unlike
// kube-proxy, syncs have been failing for longer than Timeout (see Failed); /healthz
// also needs the node to be eligible. A Service the kernel refuses is such a change;
// /healthz lists the refused Services with the kernel's reason in two fields of its
// own, which kube-proxy's clients (JSON decoders, or the status code alone) ignore.
//
// A dual-stack node's two Proxies (one per family) share one Health, as kube-proxy's
// proxiers share its ProxyHealthServer: each reports under its family, the body's
// "status" has an entry per family, and the node is healthy only when every family is.
type Health struct {
	Timeout time.Duration
	Metrics *Metrics
	Now     func() time.Time

	mu sync.Mutex
	// nodeEligible reports whether this node should get traffic from load
	// balancers (nil: always); see SetNodeEligible.
	nodeEligible func() bool
	families     map[endpoints.Family]*familyState
}

// familyState is what one family's Proxy reported.
type familyState struct {
	lastUpdated time.Time // zero until the sync loop starts
	oldestQueue time.Time // zero when nothing is pending
	// failingSince is when a sync first failed since the last successful one:
	// since then the kernel has not been made to hold the desired state (zero:
	// the last sync succeeded).
	failingSince time.Time
	refused      []Refusal
}

// family returns f's state, created on first use; h.mu must be held.
func (h *Health) family(f endpoints.Family) *familyState {
	if h.families == nil {
		h.families = map[endpoints.Family]*familyState{}
	}
	s := h.families[f]
	if s == nil {
		s = &familyState{}
		h.families[f] = s
	}
	return s
}

// Refusal is a Service whose rules the kernel refuses, with the kernel's reason.
type Refusal struct {
	Service string `json:"service"`
	Reason  string `json:"reason"`
}

// maxRefusalsShown bounds the list in the /healthz body.
const maxRefusalsShown = 20

// SetRefused records the Services the kernel refuses now in family f's table (sorted).
func (h *Health) SetRefused(f endpoints.Family, list []Refusal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.family(f).refused = list
}

// refusedServices lists the refused Services of every family, sorted.
func (h *Health) refusedServices() (shown []Refusal, total int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var all []Refusal
	for _, s := range h.families {
		all = append(all, s.refused...)
	}
	slices.SortFunc(all, func(a, b Refusal) int { return strings.Compare(a.Service+a.Reason, b.Service+b.Reason) })
	return all[:min(len(all), maxRefusalsShown)], len(all)
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

// Queued records that family f's Proxy was asked to sync.
func (h *Health) Queued(f endpoints.Family, t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.family(f); s.oldestQueue.IsZero() {
		s.oldestQueue = t
	}
}

// Synced records a successful sync of family f, and the start of its sync loop:
// kube-proxy counts that as an update so that a first sync that never succeeds shows.
// A successful sync leaves the kernel holding the desired state, so it also ends a
// run of failures.
func (h *Health) Synced(f endpoints.Family, t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.family(f)
	s.lastUpdated, s.oldestQueue, s.failingSince = t, time.Time{}, time.Time{}
}

// Failed records that a sync of family f that started at t failed, a resync's drift
// repair included. kube-proxy only reports a queued change left unprogrammed, so a
// table another program broke (a resync that cannot repair it) kept it healthy with
// no Service changing; here the desired state is missing from the kernel from the
// first failure on, and health says so once that lasts past Timeout.
func (h *Health) Failed(f endpoints.Family, t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.family(f); s.failingSince.IsZero() {
		s.failingSince = t
	}
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

// health is kube-proxy's ProxyHealthServer.Health: each family is healthy until
// its loop has started and then while no change waits past Timeout and its syncs
// have not been failing for Timeout; the whole is healthy when every family is,
// last updated when the latest family was.
func (h *Health) health(now time.Time) healthJSON {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := healthJSON{CurrentTime: now, Healthy: true}
	for f, s := range h.families {
		if s.lastUpdated.IsZero() {
			continue
		}
		if s.lastUpdated.After(b.LastUpdated) {
			b.LastUpdated = s.lastUpdated
		}
		healthy := within(s.oldestQueue, now, h.Timeout) && within(s.failingSince, now, h.Timeout)
		b.Healthy = b.Healthy && healthy
		if b.Status == nil {
			b.Status = map[string]familyHealth{}
		}
		b.Status[f.String()] = familyHealth{LastUpdated: s.lastUpdated, Healthy: healthy}
	}
	return b
}

// within reports whether since (zero: never) is less than timeout before now.
func within(since, now time.Time, timeout time.Duration) bool {
	return since.IsZero() || now.Sub(since) < timeout
}

// Healthy is the proxy's own health, what /livez answers: no change has waited
// past Timeout and the kernel has not been failing to take the desired state for
// that long. The health check node ports report it as serviceProxyHealthy;
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
