package healthcheck

import "github.com/prometheus/client_golang/prometheus"

// NewListenFailures registers svcproxy_healthcheck_nodeport_listen_failures_total
// on reg, for Config.ListenFailures: what the Server counts when a port cannot
// be opened.
func NewListenFailures(reg prometheus.Registerer) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "svcproxy_healthcheck_nodeport_listen_failures_total",
		Help: "Health check node ports of externalTrafficPolicy: Local Services that could not be opened (each Service, port and error once; retried every sync).",
	})
	reg.MustRegister(c)
	return c
}
