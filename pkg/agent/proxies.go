package agent

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/config"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/healthcheck"
	"github.com/svcproxy/svcproxy/pkg/nodeaddr"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

// familyProxy is the tracker and the proxy of one IP family: table `ip svcproxy`
// for IPv4, `ip6 svcproxy` for IPv6. A dual-stack node runs two, fed by the same
// informers, as kube-proxy runs one proxier per family.
type familyProxy struct {
	family  endpoints.Family
	tracker *endpoints.Tracker
	proxy   *proxy.Proxy
}

// ProxySettings are the settings every family's proxy takes from svcproxy's
// flags or configuration (Run) or from render's and trace's flags.
type ProxySettings struct {
	ClusterCIDR         string // one CIDR, or one per family
	MasqueradeAll       bool
	NodeName            string
	LocalhostNodePorts  bool
	ConntrackTCPLiberal bool
}

// Options are the proxy.Options of family f's proxy: its own family's entry of
// clusterCIDR, and localhost NodePorts for IPv4 only (kube-proxy has none on ::1).
func (s ProxySettings) Options(f endpoints.Family) proxy.Options {
	return proxy.Options{Family: f, ClusterCIDR: config.ClusterCIDRFor(s.ClusterCIDR, f), MasqueradeAll: s.MasqueradeAll,
		NodeName: s.NodeName, LocalhostNodePorts: s.LocalhostNodePorts && f == endpoints.IPv4, ConntrackTCPLiberal: s.ConntrackTCPLiberal}
}

// familyProxies are the proxies of the families a node serves, primary first.
type familyProxies []*familyProxy

// trackers are the proxies' trackers, for the informers or the manifest watcher.
func (fps familyProxies) trackers() []*endpoints.Tracker {
	out := make([]*endpoints.Tracker, len(fps))
	for i, fp := range fps {
		out[i] = fp.tracker
	}
	return out
}

// setNodeAddresses gives each proxy its own family's part of the NodePort
// address selection.
func (fps familyProxies) setNodeAddresses(sel nodeaddr.Selection) {
	for _, fp := range fps {
		if fp.family == endpoints.IPv6 {
			fp.proxy.SetNodeAddresses(sel.IPv6())
		} else {
			fp.proxy.SetNodeAddresses(sel.IPv4())
		}
	}
}

// setZone tells every family's proxy this node's zone, for topology hints.
func (fps familyProxies) setZone(zone string) {
	for _, fp := range fps {
		fp.proxy.SetZone(zone)
	}
}

// served is the part of sel in the families these proxies serve.
func (fps familyProxies) served(sel nodeaddr.Selection) nodeaddr.Selection {
	var v4, v6 bool
	for _, fp := range fps {
		if fp.family == endpoints.IPv6 {
			v6 = true
		} else {
			v4 = true
		}
	}
	return sel.Families(v4, v6)
}

// serviceUID finds a Service's UID in whichever tracker knows it (a single-stack
// Service is in one family's only), for the Events posted on it.
func (fps familyProxies) serviceUID(namespace, name string) types.UID {
	for _, fp := range fps {
		if uid, ok := fp.tracker.ServiceUID(endpoints.ServiceKey{Namespace: namespace, Name: name}); ok {
			return uid
		}
	}
	return ""
}

// run runs every proxy until ctx ends or one fails; the others are stopped then.
func (fps familyProxies) run(ctx context.Context, waitReady func(context.Context) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(fps))
	for _, fp := range fps {
		// Another program's change to the table is repaired at once, not at
		// the next --sync-period.
		go fp.proxy.WatchForeignChanges(ctx)
		go func() {
			err := fp.proxy.Run(ctx, waitReady)
			if err != nil {
				klog.ErrorS(err, "Proxy stopped", "ipFamily", fp.family)
			}
			errs <- err
		}()
	}
	var first error
	for range fps {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

// allSynced calls then once every family has synced once (then from the
// goroutine of the last one): kube-proxy's rules may go only when ours serve
// every Service of every family.
func allSynced(families []endpoints.Family, then func()) func(endpoints.Family) func() {
	var mu sync.Mutex
	synced := map[endpoints.Family]bool{}
	return func(f endpoints.Family) func() {
		return func() {
			mu.Lock()
			synced[f] = true
			all := len(synced) == len(families)
			mu.Unlock()
			if all {
				then()
			}
		}
	}
}

// healthCheckMerger joins the Local Services of every family's proxy for the one
// health check node port server: a dual-stack Service has one health check node
// port; it reports the larger of its families' local endpoint counts (each pod
// has an address of each family, so both count the same pods).
type healthCheckMerger struct {
	hc *healthcheck.Server
	mu sync.Mutex
	by map[endpoints.Family]map[endpoints.ServiceKey]proxy.HealthCheckService
}

func newHealthCheckMerger(hc *healthcheck.Server) *healthCheckMerger {
	return &healthCheckMerger{hc: hc, by: map[endpoints.Family]map[endpoints.ServiceKey]proxy.HealthCheckService{}}
}

// hook is family f's proxy's OnHealthCheckServices.
func (m *healthCheckMerger) hook(f endpoints.Family) func(map[endpoints.ServiceKey]proxy.HealthCheckService) {
	return func(services map[endpoints.ServiceKey]proxy.HealthCheckService) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.by[f] = services
		m.hc.Sync(mergeHealthChecks(m.by))
	}
}

func mergeHealthChecks(by map[endpoints.Family]map[endpoints.ServiceKey]proxy.HealthCheckService) map[endpoints.ServiceKey]healthcheck.Service {
	out := map[endpoints.ServiceKey]healthcheck.Service{}
	for _, services := range by {
		for k, v := range services {
			cur, ok := out[k]
			if !ok || v.LocalEndpoints > cur.LocalEndpoints {
				out[k] = healthcheck.Service{NodePort: v.NodePort, LocalEndpoints: v.LocalEndpoints}
			}
		}
	}
	return out
}

// conflictGauge sums the families' conflicting Services (or node ports) into one
// gauge: each tracker reports its own family's count.
type conflictGauge struct {
	gauge prometheus.Gauge
	mu    sync.Mutex
	by    map[endpoints.Family]float64
}

// family is the gauge family f's tracker sets (events.ConflictReporter's).
func (c *conflictGauge) family(f endpoints.Family) familyGauge {
	return familyGauge{c: c, f: f}
}

type familyGauge struct {
	c *conflictGauge
	f endpoints.Family
}

func (g familyGauge) Set(v float64) {
	g.c.mu.Lock()
	defer g.c.mu.Unlock()
	if g.c.by == nil {
		g.c.by = map[endpoints.Family]float64{}
	}
	g.c.by[g.f] = v
	var sum float64
	for _, n := range g.c.by {
		sum += n
	}
	g.c.gauge.Set(sum)
}

// trackerSet feeds every family's tracker the same objects.
type trackerSet []*endpoints.Tracker

func (ts trackerSet) OnServiceAdd(s *corev1.Service) {
	for _, t := range ts {
		t.OnServiceAdd(s)
	}
}

func (ts trackerSet) OnServiceDelete(s *corev1.Service) {
	for _, t := range ts {
		t.OnServiceDelete(s)
	}
}

func (ts trackerSet) OnEndpointSliceAdd(s *discoveryv1.EndpointSlice) {
	for _, t := range ts {
		t.OnEndpointSliceAdd(s)
	}
}

func (ts trackerSet) OnEndpointSliceDelete(s *discoveryv1.EndpointSlice) {
	for _, t := range ts {
		t.OnEndpointSliceDelete(s)
	}
}
