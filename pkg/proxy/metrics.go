package proxy

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics uses kube-proxy's metric names where the meaning is the same, so existing
// dashboards and alerts keep working after the swap.
type Metrics struct {
	SyncDuration        prometheus.Histogram
	FullSyncDuration    prometheus.Histogram
	PartialSyncDuration prometheus.Histogram
	LastSync            prometheus.Gauge
	LastQueued          prometheus.Gauge
	ProgrammingLatency  prometheus.Histogram
	ServiceChanges      prometheus.Counter
	SyncFailures        prometheus.Counter
	InvalidObjects      *prometheus.CounterVec
	ConflictingServices prometheus.Gauge
	ConntrackDeleted    prometheus.Counter
	RefusedChanges      prometheus.Counter
	RefusedServices     prometheus.Gauge
	TxObjects           prometheus.Histogram
	KernelReadDuration  prometheus.Histogram
	HealthzTotal        *prometheus.CounterVec
	LivezTotal          *prometheus.CounterVec
	ManifestErrors      prometheus.Gauge
	// AffinityEntriesDeleted counts ClientIP-affinity entries the sweeper deleted.
	AffinityEntriesDeleted prometheus.Counter
}

// NewMetrics creates the metrics and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	buckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	m := &Metrics{
		SyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kubeproxy_sync_proxy_rules_duration_seconds",
			Help: "SyncProxyRules latency in seconds", Buckets: buckets}),
		FullSyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kubeproxy_sync_full_proxy_rules_duration_seconds",
			Help: "SyncProxyRules latency in seconds for full resyncs", Buckets: buckets}),
		PartialSyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kubeproxy_sync_partial_proxy_rules_duration_seconds",
			Help: "SyncProxyRules latency in seconds for partial resyncs", Buckets: buckets}),
		LastSync: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
			Help: "The last time proxy rules were successfully synced"}),
		LastQueued: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
			Help: "The last time a sync of proxy rules was queued"}),
		ProgrammingLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kubeproxy_network_programming_duration_seconds",
			Help:    "In Cluster Network Programming Latency in seconds",
			Buckets: append(prometheus.LinearBuckets(0.25, 0.25, 2), prometheus.LinearBuckets(1, 1, 59)...)}),
		ServiceChanges: prometheus.NewCounter(prometheus.CounterOpts{Name: "kubeproxy_sync_proxy_rules_service_changes_total",
			Help: "Cumulative proxy rules Service changes"}),
		SyncFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
			Help: "Cumulative proxy nftables sync failures"}),
		InvalidObjects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "svcproxy_invalid_objects_total",
			Help: "Services and EndpointSlices (or parts of them) skipped because they were malformed"}, []string{"kind"}),
		ConflictingServices: prometheus.NewGauge(prometheus.GaugeOpts{Name: "svcproxy_conflicting_services",
			Help: "Services not proxied because an older Service has the same ClusterIP (each has a ClusterIPConflict Event)"}),
		ConntrackDeleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "svcproxy_conntrack_entries_deleted_total",
			Help: "UDP and SCTP conntrack entries deleted because their endpoint no longer serves the Service address"}),
		RefusedChanges: prometheus.NewCounter(prometheus.CounterOpts{Name: "svcproxy_sync_refused_owner_changes_total",
			Help: "Changes of one Service (or of the table skeleton) that the kernel refused even when applied alone"}),
		RefusedServices: prometheus.NewGauge(prometheus.GaugeOpts{Name: "svcproxy_refused_services",
			Help: "Services whose rules the kernel refuses (retried every sync; listed in /healthz)"}),
		TxObjects: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "svcproxy_sync_transaction_objects",
			Help: "Objects (chains, rules, elements) touched by one nftables transaction", Buckets: prometheus.ExponentialBuckets(1, 4, 12)}),
		KernelReadDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "svcproxy_kernel_read_duration_seconds",
			Help: "Time to read svcproxy's table back from the kernel (start-up adoption and drift checks)", Buckets: buckets}),
		HealthzTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubeproxy_proxy_healthz_total",
			Help: "Cumulative proxy healthz HTTP status"}, []string{"code"}),
		LivezTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubeproxy_proxy_livez_total",
			Help: "Cumulative proxy livez HTTP status"}, []string{"code"}),
		ManifestErrors: prometheus.NewGauge(prometheus.GaugeOpts{Name: "svcproxy_manifest_errors",
			Help: "With --manifests: documents (or List items) currently skipped because they do not decode or their file cannot be read"}),
		AffinityEntriesDeleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "svcproxy_affinity_entries_deleted_total",
			Help: "ClientIP-affinity entries deleted because their endpoint no longer serves their Service port"}),
	}
	if reg != nil {
		reg.MustRegister(m.SyncDuration, m.FullSyncDuration, m.PartialSyncDuration, m.LastSync, m.LastQueued,
			m.ProgrammingLatency, m.ServiceChanges, m.SyncFailures, m.InvalidObjects, m.ConflictingServices, m.ConntrackDeleted, m.RefusedChanges, m.RefusedServices, m.TxObjects, m.KernelReadDuration,
			m.HealthzTotal, m.LivezTotal, m.ManifestErrors,
			m.AffinityEntriesDeleted)
	}
	return m
}
