package takeover

import "github.com/prometheus/client_golang/prometheus"

// NewRemovedObjects registers svcproxy_takeover_removed_objects_total on reg,
// with every Kind at 0 so that a dashboard sees the series before anything is
// removed. Report.CountRemoved adds to it.
func NewRemovedObjects(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "svcproxy_takeover_removed_objects_total",
		Help: "Objects kube-proxy left in the kernel that svcproxy removed, by kind.",
	}, []string{"kind"})
	for _, k := range Kinds {
		c.WithLabelValues(string(k))
	}
	reg.MustRegister(c)
	return c
}

// CountRemoved adds what r removed, by kind, to c (from NewRemovedObjects; nil:
// not counted).
func (r Report) CountRemoved(c *prometheus.CounterVec) {
	if c == nil {
		return
	}
	for k, n := range r.Removed {
		c.WithLabelValues(string(k)).Add(float64(n))
	}
}
