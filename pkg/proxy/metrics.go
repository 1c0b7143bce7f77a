package proxy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

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
	// ConflictingNodePorts counts node port uses left out by conflicts.
	ConflictingNodePorts prometheus.Gauge
	ConntrackDeleted     prometheus.Counter
	RefusedChanges       prometheus.Counter
	RefusedServices      prometheus.Gauge
	TxObjects            prometheus.Histogram
	KernelReadDuration   prometheus.Histogram
	// KernelPartialReadDuration times the reads of the parts of the table
	// another program changed (readParts); its count counts them, as
	// KernelReadDuration's counts the reads of the whole table.
	KernelPartialReadDuration prometheus.Histogram
	// AffinityEntriesDeleted counts ClientIP-affinity entries the sweeper deleted.
	AffinityEntriesDeleted prometheus.Counter
	// ForeignChanges counts the notifications of another program's change to our
	// table or anchor table (or of lost notifications) that asked for a repair.
	ForeignChanges prometheus.Counter

	// byFamily makes the ip_family children of the labelled metrics (ForFamily).
	byFamily func(family string, m *Metrics)
	// family is the ip_family this view's labelled metrics are the children of.
	family string
}

// ForFamily returns the metrics a Proxy of family f updates: the ip_family-labelled
// ones (kube-proxy's sync, programming, no-local and conntrack metrics) are the
// children labelled f, everything else is shared. A dual-stack node's two Proxies
// register one Metrics and each takes its family's view, as kube-proxy's proxiers
// label the same metrics with their family. NewMetrics' own view is IPv4's.
//
// A view already of family f is returned as it is: Proxy.New takes its family's
// view, and an observer a caller put in place of one of f's (the benchmark's, which
// keeps every sample) must stay there.
func (m *Metrics) ForFamily(f endpoints.Family) *Metrics {
	c := *m
	if m.byFamily != nil && m.family != f.String() {
		m.byFamily(f.String(), &c)
		c.family = f.String()
	}
	return &c
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
	// The labelled metrics are made as vectors here; m.byFamily below takes each
	// family's children, in the order the vectors are made (TestMetricsPerFamily
	// checks the pairing).
	var histograms []*prometheus.HistogramVec
	var gauges []*prometheus.GaugeVec
	var counters []*prometheus.CounterVec
	histogram := func(name, help string, buckets []float64) prometheus.Observer {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: alpha(help), Buckets: buckets}, []string{"ip_family"})
		family(v)
		histograms = append(histograms, v)
		return nil
	}
	gauge := func(name, help string) prometheus.Gauge {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: alpha(help)}, []string{"ip_family"})
		family(v)
		gauges = append(gauges, v)
		return nil
	}
	counter := func(name, help string) prometheus.Counter {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: alpha(help)}, []string{"ip_family"})
		family(v)
		counters = append(counters, v)
		return nil
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
		SyncDuration:            histogram("kubeproxy_sync_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds", syncBuckets),
		FullSyncDuration:        histogram("kubeproxy_sync_full_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds for full resyncs", syncBuckets),
		PartialSyncDuration:     histogram("kubeproxy_sync_partial_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds for partial resyncs", syncBuckets),
		LastSync:                gauge("kubeproxy_sync_proxy_rules_last_timestamp_seconds", "The last time proxy rules were successfully synced"),
		LastQueued:              gauge("kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", "The last time a sync of proxy rules was queued"),
		ProgrammingLatency:      histogram("kubeproxy_network_programming_duration_seconds", "In Cluster Network Programming Latency in seconds", programmingBuckets),
		EndpointChanges:         plainCounter("kubeproxy_sync_proxy_rules_endpoint_changes_total", alpha("Cumulative proxy rules Endpoint changes")),
		EndpointChangesPending:  plainGauge("kubeproxy_sync_proxy_rules_endpoint_changes_pending", alpha("Pending proxy rules Endpoint changes")),
		ServiceChanges:          plainCounter("kubeproxy_sync_proxy_rules_service_changes_total", alpha("Cumulative proxy rules Service changes")),
		ServiceChangesPending:   plainGauge("kubeproxy_sync_proxy_rules_service_changes_pending", alpha("Pending proxy rules Service changes")),
		SyncFailures:            counter("kubeproxy_sync_proxy_rules_nftables_sync_failures_total", "Cumulative proxy nftables sync failures"),
		CleanupFailures:         counter("kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total", "Cumulative proxy nftables cleanup failures"),
		ConntrackSyncDuration:   histogram("kubeproxy_conntrack_reconciler_sync_duration_seconds", "ReconcileConntrackFlowsLatency latency in seconds", syncBuckets),
		ConntrackDeletedEntries: counter("kubeproxy_conntrack_reconciler_deleted_entries_total", "Cumulative conntrack flows deleted by conntrack reconciler"),
		HealthzTotal:            codes("kubeproxy_proxy_healthz_total", "Cumulative proxy healthz HTTP status"),
		LivezTotal:              codes("kubeproxy_proxy_livez_total", "Cumulative proxy livez HTTP status"),

		InvalidObjects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "svcproxy_invalid_objects_total",
			Help: "Services, EndpointSlices and ServiceCIDRs (or parts of them) skipped because they were malformed"}, []string{"kind"}),
		ConflictingServices: plainGauge("svcproxy_conflicting_services",
			"Services not proxied because an older Service has the same ClusterIP (each has a ClusterIPConflict Event), or served without an externalIP or load balancer IP on a port because it is another Service's ClusterIP or an older Service's external address there (ExternalIPConflict Events), per IP family"),
		ConflictingNodePorts: plainGauge("svcproxy_conflicting_node_ports",
			"Node ports (nodePorts and healthCheckNodePorts) Services are served without because an older Service uses the same port and protocol, per IP family (each has a NodePortConflict Event)"),
		ConntrackDeleted: plainCounter("svcproxy_conntrack_entries_deleted_total",
			"UDP and SCTP conntrack entries deleted because their endpoint no longer serves the Service address, and TCP entries of unanswered SYNs that went to a Service address untranslated or to such an endpoint"),
		RefusedChanges: plainCounter("svcproxy_sync_refused_owner_changes_total",
			"Changes of one Service (or of the table skeleton) that the kernel refused even when applied alone"),
		RefusedServices: plainGauge("svcproxy_refused_services",
			"Services whose rules the kernel refuses (retried every sync; listed in /healthz)"),
		TxObjects: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "svcproxy_sync_transaction_objects",
			Help: "Objects (chains, rules, elements) touched by one nftables transaction", Buckets: prometheus.ExponentialBuckets(1, 4, 12)}),
		KernelReadDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "svcproxy_kernel_read_duration_seconds",
			Help: "Time to read svcproxy's whole table back from the kernel (start-up adoption and drift checks; not the repair of parts another program changed)", Buckets: syncBuckets}),
		KernelPartialReadDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "svcproxy_kernel_partial_read_duration_seconds",
			Help: "Time to read back the parts of svcproxy's table (chains, sets) that another program changed, as its nftables notifications named them, for their repair; its _count counts these partial reads", Buckets: syncBuckets}),
		AffinityEntriesDeleted: plainCounter("svcproxy_affinity_entries_deleted_total",
			"ClientIP-affinity entries deleted because their endpoint no longer serves their Service port"),
		ForeignChanges: plainCounter("svcproxy_foreign_table_changes_total",
			"Batches of nftables notifications that showed another program changing svcproxy's table or its anchor table (or that notifications were lost); each asks for a repair, at most one per --min-sync-period (1 s at least)"),
	}
	m.byFamily = func(ipFamily string, m *Metrics) {
		for i, o := range []*prometheus.Observer{&m.SyncDuration, &m.FullSyncDuration, &m.PartialSyncDuration, &m.ProgrammingLatency, &m.ConntrackSyncDuration} {
			*o = histograms[i].WithLabelValues(ipFamily)
		}
		for i, g := range []*prometheus.Gauge{&m.LastSync, &m.LastQueued} {
			*g = gauges[i].WithLabelValues(ipFamily)
		}
		for i, c := range []*prometheus.Counter{&m.SyncFailures, &m.CleanupFailures, &m.ConntrackDeletedEntries} {
			*c = counters[i].WithLabelValues(ipFamily)
		}
		m.NoLocalEndpointsInternal = noLocal.WithLabelValues("internal", ipFamily)
		m.NoLocalEndpointsExternal = noLocal.WithLabelValues("external", ipFamily)
	}
	m.byFamily(endpoints.IPv4.String(), m)
	m.family = endpoints.IPv4.String()
	if reg != nil {
		reg.MustRegister(collectors...)
		reg.MustRegister(m.InvalidObjects, m.TxObjects, m.KernelReadDuration, m.KernelPartialReadDuration)
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
