package manifests

import "github.com/prometheus/client_golang/prometheus"

// NewErrors registers svcproxy_manifest_errors on reg, the gauge Watch sets to
// the number of documents and files it currently skips. It is registered in
// cluster mode too (at 0), so that the series set does not depend on the mode.
func NewErrors(reg prometheus.Registerer) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "svcproxy_manifest_errors",
		Help: "With --manifests: documents (or List items) currently skipped because they do not decode or are invalid, and files skipped because they cannot be read (not a regular file, over the size cap)"})
	reg.MustRegister(g)
	return g
}
