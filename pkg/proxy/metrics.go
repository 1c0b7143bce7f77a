package proxy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

// ipFamily is the ip_family label value of kube-proxy's metrics: svcproxy proxies IPv4.
const ipFamily = "IPv4"

// Metrics exposes every metric kube-proxy's nftables mode exposes, with its name,
// help (component-base's "[ALPHA] " prefix included), type, labels and buckets, so
// existing dashboards and alerts keep working after the swap; the list is checked
// against kube-proxy's in metrics_test.go. svcproxy's own metrics are svcproxy_*.
type Metrics struct {
	// kube-proxy's.
	SyncDuration             prometheus.Observer
	FullSyncDuration         prometheus.Observer
	PartialSyncDuration      prometheus.Observer
	LastSync                 prometheus.Gauge
	LastQueued               prometheus.Gauge
	ProgrammingLatency       prometheus.Observer
	EndpointChanges          prometheus.Counter
	EndpointChangesPending   prometheus.Gauge
	ServiceChanges           prometheus.Counter
	ServiceChangesPending    prometheus.Gauge
	NoLocalEndpointsInternal prometheus.Gauge
	NoLocalEndpointsExternal prometheus.Gauge
	SyncFailures             prometheus.Counter
	// CleanupFailures stays 0: kube-proxy deletes stale chains in a transaction
	// of their own, svcproxy in the sync's transaction, whose failures are
	// SyncFailures.
	CleanupFailures         prometheus.Counter
	ConntrackSyncDuration   prometheus.Observer
	ConntrackDeletedEntries prometheus.Counter
	HealthzTotal            *prometheus.CounterVec
	LivezTotal              *prometheus.CounterVec

	// svcproxy's.
	InvalidObjects      *prometheus.CounterVec
	ConflictingServices prometheus.Gauge
	ConntrackDeleted    prometheus.Counter
	RefusedChanges      prometheus.Counter
	RefusedServices     prometheus.Gauge
	TxObjects           prometheus.Histogram
	KernelReadDuration  prometheus.Histogram
	ManifestErrors      prometheus.Gauge
	// AffinityEntriesDeleted counts ClientIP-affinity entries the sweeper deleted.
	AffinityEntriesDeleted prometheus.Counter
}

// kube-proxy's buckets (pkg/proxy/metrics/metrics.go).
var (
	syncBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)
	// programmingBuckets is component-base's MergeBuckets, which starts with 0.
	programmingBuckets = concat([]float64{0},
		prometheus.LinearBuckets(0.25, 0.25, 2), // 0.25s, 0.50s
		prometheus.LinearBuckets(1, 1, 59),      // 1s ... 59s
		prometheus.LinearBuckets(60, 5, 12),     // 60s ... 115s
		prometheus.LinearBuckets(120, 30, 7))    // 2min ... 5min
)

func concat(parts ...[]float64) []float64 {
	var out []float64
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// alpha is the help text component-base gives a metric of StabilityLevel ALPHA.
func alpha(help string) string { return "[ALPHA] " + help }

// NewMetrics creates the metrics and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	var collectors []prometheus.Collector
	family := func(c prometheus.Collector) { collectors = append(collectors, c) }
	histogram := func(name, help string, buckets []float64) prometheus.Observer {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: alpha(help), Buckets: buckets}, []string{"ip_family"})
		family(v)
		return v.WithLabelValues(ipFamily)
	}
	gauge := func(name, help string) prometheus.Gauge {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: alpha(help)}, []string{"ip_family"})
		family(v)
		return v.WithLabelValues(ipFamily)
	}
	counter := func(name, help string) prometheus.Counter {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: alpha(help)}, []string{"ip_family"})
		family(v)
		return v.WithLabelValues(ipFamily)
	}
	plainGauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		family(g)
		return g
	}
	plainCounter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		family(c)
		return c
	}
	codes := func(name, help string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: alpha(help)}, []string{"code"})
		family(v)
		return v
	}
	noLocal := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kubeproxy_sync_proxy_rules_no_local_endpoints_total",
		Help: alpha("Number of services with a Local traffic policy and no endpoints")}, []string{"traffic_policy", "ip_family"})
	family(noLocal)

	m := &Metrics{
		SyncDuration:             histogram("kubeproxy_sync_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds", syncBuckets),
		FullSyncDuration:         histogram("kubeproxy_sync_full_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds for full resyncs", syncBuckets),
		PartialSyncDuration:      histogram("kubeproxy_sync_partial_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds for partial resyncs", syncBuckets),
		LastSync:                 gauge("kubeproxy_sync_proxy_rules_last_timestamp_seconds", "The last time proxy rules were successfully synced"),
		LastQueued:               gauge("kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", "The last time a sync of proxy rules was queued"),
		ProgrammingLatency:       histogram("kubeproxy_network_programming_duration_seconds", "In Cluster Network Programming Latency in seconds", programmingBuckets),
		EndpointChanges:          plainCounter("kubeproxy_sync_proxy_rules_endpoint_changes_total", alpha("Cumulative proxy rules Endpoint changes")),
		EndpointChangesPending:   plainGauge("kubeproxy_sync_proxy_rules_endpoint_changes_pending", alpha("Pending proxy rules Endpoint changes")),
		ServiceChanges:           plainCounter("kubeproxy_sync_proxy_rules_service_changes_total", alpha("Cumulative proxy rules Service changes")),
		ServiceChangesPending:    plainGauge("kubeproxy_sync_proxy_rules_service_changes_pending", alpha("Pending proxy rules Service changes")),
		NoLocalEndpointsInternal: noLocal.WithLabelValues("internal", ipFamily),
		NoLocalEndpointsExternal: noLocal.WithLabelValues("external", ipFamily),
		SyncFailures:             counter("kubeproxy_sync_proxy_rules_nftables_sync_failures_total", "Cumulative proxy nftables sync failures"),
		CleanupFailures:          counter("kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total", "Cumulative proxy nftables cleanup failures"),
		ConntrackSyncDuration:    histogram("kubeproxy_conntrack_reconciler_sync_duration_seconds", "ReconcileConntrackFlowsLatency latency in seconds", syncBuckets),
		ConntrackDeletedEntries:  counter("kubeproxy_conntrack_reconciler_deleted_entries_total", "Cumulative conntrack flows deleted by conntrack reconciler"),
		HealthzTotal:             codes("kubeproxy_proxy_healthz_total", "Cumulative proxy healthz HTTP status"),
		LivezTotal:               codes("kubeproxy_proxy_livez_total", "Cumulative proxy livez HTTP status"),

		InvalidObjects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "svcproxy_invalid_objects_total",
			Help: "Services and EndpointSlices (or parts of them) skipped because they were malformed"}, []string{"kind"}),
		ConflictingServices: plainGauge("svcproxy_conflicting_services",
			"Services not proxied because an older Service has the same ClusterIP (each has a ClusterIPConflict Event)"),
		ConntrackDeleted: plainCounter("svcproxy_conntrack_entries_deleted_total",
			"UDP and SCTP conntrack entries deleted because their endpoint no longer serves the Service address"),
		RefusedChanges: plainCounter("svcproxy_sync_refused_owner_changes_total",
			"Changes of one Service (or of the table skeleton) that the kernel refused even when applied alone"),
		RefusedServices: plainGauge("svcproxy_refused_services",
			"Services whose rules the kernel refuses (retried every sync; listed in /healthz)"),
		TxObjects: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "svcproxy_sync_transaction_objects",
			Help: "Objects (chains, rules, elements) touched by one nftables transaction", Buckets: prometheus.ExponentialBuckets(1, 4, 12)}),
		KernelReadDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "svcproxy_kernel_read_duration_seconds",
			Help: "Time to read svcproxy's table back from the kernel (start-up adoption and drift checks)", Buckets: syncBuckets}),
		ManifestErrors: plainGauge("svcproxy_manifest_errors",
			"With --manifests: documents (or List items) currently skipped because they do not decode or their file cannot be read"),
		AffinityEntriesDeleted: plainCounter("svcproxy_affinity_entries_deleted_total",
			"ClientIP-affinity entries deleted because their endpoint no longer serves their Service port"),
	}
	if reg != nil {
		reg.MustRegister(collectors...)
		reg.MustRegister(m.InvalidObjects, m.TxObjects, m.KernelReadDuration)
	}
	return m
}

// ServiceEvent counts a Service event (endpoints.ChangeCounts).
func (m *Metrics) ServiceEvent() { m.ServiceChanges.Inc() }

// EndpointSliceEvent counts an EndpointSlice event (endpoints.ChangeCounts).
func (m *Metrics) EndpointSliceEvent() { m.EndpointChanges.Inc() }

// Pending sets the pending-change gauges (endpoints.ChangeCounts).
func (m *Metrics) Pending(services, endpointSlices int) {
	m.ServiceChangesPending.Set(float64(services))
	m.EndpointChangesPending.Set(float64(endpointSlices))
}

var _ endpoints.ChangeCounts = (*Metrics)(nil)
