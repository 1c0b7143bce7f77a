// Package agent is the running svcproxy: from agent.Options (the flags and
// KubeProxyConfiguration, resolved by cmd/svcproxy) to one tracker and proxy
// per IP family the node serves, fed by the cluster's informers or a manifests
// directory, with the metrics and health servers and kube-proxy's endpoints on
// them, Events, the health check node ports following the node's addresses,
// and the takeover from kube-proxy after the first sync. It builds each
// family's proxy.Options in one place (ProxySettings), which render and trace
// use too.
package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/config"
	"github.com/svcproxy/svcproxy/pkg/conntrack"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/events"
	"github.com/svcproxy/svcproxy/pkg/healthcheck"
	"github.com/svcproxy/svcproxy/pkg/manifests"
	"github.com/svcproxy/svcproxy/pkg/nft"
	"github.com/svcproxy/svcproxy/pkg/node"
	"github.com/svcproxy/svcproxy/pkg/proxy"
	"github.com/svcproxy/svcproxy/pkg/takeover"
)

// Run runs the proxy on this node until ctx ends: one tracker and proxy per IP
// family the node serves, fed by the cluster's informers or by o.Manifests, the
// metrics and health servers, Events, the health check node ports and the
// takeover from kube-proxy. With o.Cleanup it removes what svcproxy (and, unless
// o.NoTakeover, kube-proxy) left in the kernel instead.
func Run(ctx context.Context, o *Options) error { return run(ctx, o, nodeEnv(o.SysctlDir)) }

// serveEnv is what Run takes from the machine it runs on; tests give a fake
// kernel and their own network namespace.
type serveEnv struct {
	// kernel programs family f's table.
	kernel func(f endpoints.Family) nft.Kernel
	// conntrack is the conntrack cleaner (nil: none).
	conntrack func() (*conntrack.Cleaner, error)
	// usable says why family f cannot be served (nil: it can).
	usable func(f endpoints.Family) error
	// setSysctl writes sysctls: route_localnet for localhost NodePorts, the
	// conntrack timeouts at start (nil: none).
	setSysctl func(path, value string) error
	// netNS is the network namespace whose addresses serve NodePorts (0: ours).
	netNS int
	// started, when set, is told the proxies once they are built.
	started func(familyProxies)
}

// nodeEnv is the real node: netlink in svcproxy's own network namespace, its
// sysctls at sysctlDir (--sysctl-dir).
func nodeEnv(sysctlDir string) serveEnv {
	// One namespace: the families' notification watchers pause together.
	gate := &nft.NotifyGate{}
	return serveEnv{
		kernel:    func(endpoints.Family) nft.Kernel { return &nft.Netlink{Notifications: gate} },
		conntrack: func() (*conntrack.Cleaner, error) { return conntrack.New(0) },
		usable:    node.FamilyUsable,
		// In the namespace svcproxy runs in (best effort where /proc/sys is
		// read-only: a pod that is not privileged, without deploy/'s mount).
		setSysctl: tolerateReadOnlyProcSys(proxy.WriteProcSysUnder(sysctlDir)),
	}
}

func run(ctx context.Context, o *Options, env serveEnv) error {
	if o.Cleanup {
		return cleanup(ctx, o, env)
	}

	applyOOMScoreAdj(o.Config.OOMScoreAdj)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := proxy.NewMetrics(reg)
	manifestErrors := manifests.NewErrors(reg)
	takeoverRemoved := takeover.NewRemovedObjects(reg)
	health := &proxy.Health{Timeout: 2 * o.SyncPeriod, Metrics: metrics}

	recorder := &events.Recorder{} // log only until connected to a cluster
	defer recorder.Shutdown()
	hc := newHealthCheckServer(reg, recorder, nodeName(o), health)
	hc.CloseOnDone(ctx)

	mh, err := metricsHandler(reg, o)
	if err != nil {
		return err
	}
	if err := listen(ctx, "metrics", o.MetricsAddr, mh); err != nil {
		return err
	}

	var client cluster
	var thisNode *node.Watcher // this node's Node object (nil without a cluster)
	if o.Manifests == "" {
		if client, err = clusterClient(o); err != nil {
			return err
		}
		// Like kube-proxy, /healthz answers once this node's Node is known
		// (or node.Wait passed), so that its first answer is right; the Node's
		// addresses also give the primary IP family.
		nw := node.Watch(ctx, client.core, client.watchList, nodeName(o), node.Wait)
		thisNode = &nw
		health.SetNodeEligible(thisNode.Eligible)
	}
	if env.setSysctl != nil {
		// As kube-proxy at start; its failure is logged, not fatal: the
		// Services are served either way.
		if err := conntrack.SetTimeouts(env.setSysctl, config.ConntrackTimeouts(o.Config)); err != nil {
			klog.ErrorS(err, "Setting the configured conntrack timeouts")
		}
	}
	var status []corev1.NodeAddress
	if thisNode != nil {
		status = thisNode.Addresses()
	}
	families, err := node.ServedFamilies(node.PrimaryFamily(status, o.BindAddress), env.usable)
	if err != nil {
		return err
	}
	warnings, fatal := config.CheckFamilies(families[0], len(families) == 2, o.ClusterCIDR, config.NodePortEntries(o.Config), o.HealthzAddr, o.MetricsAddr)
	for _, w := range warnings {
		klog.ErrorS(errors.New(w), "svcproxy configuration may be incomplete or incorrect")
	}
	if fatal != nil {
		return fmt.Errorf("invalid configuration: %w", fatal)
	}
	fps := newFamilyProxies(ctx, o, env, families, proxyParts{
		metrics: metrics, health: health, events: recorder, hc: hc, takeoverRemoved: takeoverRemoved,
	})
	if thisNode != nil {
		fps.setZone(thisNode.Zone()) // before the first sync, which then renders for it
		go thisNode.FollowZone(ctx, fps.setZone)
	}
	if env.started != nil {
		env.started(fps)
	}

	if err := listen(ctx, "healthz", o.HealthzAddr, health.Handler()); err != nil {
		return err
	}
	var waitReady func(context.Context) bool
	if o.Manifests != "" {
		waitReady, err = manifests.Watch(ctx, o.Manifests, trackerSet(fps.trackers()), manifestErrors)
	} else {
		recorder.Connect(client.core, client.events, nodeName(o), fps.serviceUID)
		waitReady, err = watchCluster(ctx, client, fps.trackers())
		if err == nil {
			watchServiceCIDRs(ctx, client, fps, metrics.InvalidObjects)
		}
	}
	if err != nil {
		return err
	}
	// Before the first sync, so that it already serves NodePorts where it should.
	if err := watchNodePortAddresses(ctx, o, thisNode, env.netNS, fps, hc); err != nil {
		return err
	}
	// kube-proxy's "birth cry": after the informers start, before the sync loop.
	recorder.Started(ctx)
	for _, fp := range fps {
		klog.InfoS("svcproxy started", "table", proxy.TableFamily(fp.family).String()+" "+proxy.TableName, "ipFamily", fp.family, "thisNode", nodeName(o))
	}
	return fps.run(ctx, waitReady)
}

// proxyParts are what every family's proxy shares: one metrics registry, one
// health (/healthz, /livez), one Event recorder, one health check node port
// server, one takeover.
type proxyParts struct {
	metrics         *proxy.Metrics
	health          *proxy.Health
	events          *events.Recorder
	hc              *healthcheck.Server
	takeoverRemoved *prometheus.CounterVec
}

// newFamilyProxies builds a tracker and a proxy per family.
func newFamilyProxies(ctx context.Context, o *Options, env serveEnv, families []endpoints.Family, parts proxyParts) familyProxies {
	var ct *conntrack.Cleaner
	if env.conntrack != nil {
		var err error
		if ct, err = env.conntrack(); err != nil {
			klog.ErrorS(err, "No conntrack cleanup for UDP and SCTP Services")
		}
	}
	var onSynced func(endpoints.Family) func()
	if !o.NoTakeover {
		onSynced = allSynced(families, takeover.AfterSync(ctx, parts.takeoverRemoved))
	}
	hcs := newHealthCheckMerger(parts.hc)
	conflicts := &conflictGauge{gauge: parts.metrics.ConflictingServices}
	portConflicts := &conflictGauge{gauge: parts.metrics.ConflictingNodePorts}
	settings := ProxySettings{ClusterCIDR: o.ClusterCIDR, MasqueradeAll: o.MasqueradeAll, NodeName: nodeName(o),
		LocalhostNodePorts: o.LocalhostNodePorts, ConntrackTCPLiberal: proxy.ReadConntrackTCPLiberal()}
	fps := make(familyProxies, 0, len(families))
	ledger := &proxy.CommitLedger{}
	for _, f := range families {
		fp := &familyProxy{family: f}
		fp.tracker = endpoints.NewTracker(endpoints.TrackerOptions{
			Family: f,
			OnInvalid: func(kind, ns, name, reason string) {
				klog.InfoS("Skipping malformed input", "kind", kind, "object", ns+"/"+name, "ipFamily", f, "reason", reason)
				parts.metrics.InvalidObjects.WithLabelValues(kind).Inc()
			},
			OnChange:   func() { fp.proxy.Trigger() },
			OnConflict: events.ConflictReporter(parts.events, conflicts.family(f), portConflicts.family(f)),
			Counts:     parts.metrics,
		})
		cfg := proxy.Config{
			Options:               settings.Options(f),
			Tracker:               fp.tracker,
			Kernel:                env.kernel(f),
			Metrics:               parts.metrics,
			Health:                parts.health,
			SyncPeriod:            o.SyncPeriod,
			MinSyncPeriod:         o.MinSyncPeriod,
			SpaceByCost:           !o.MinSyncPeriodSet,
			SetSysctl:             env.setSysctl,
			OnHealthCheckServices: hcs.hook(f),
			Ledger:                ledger,
		}
		if ct != nil {
			cfg.Conntrack = ct
		}
		if onSynced != nil {
			cfg.OnSynced = onSynced(f)
		}
		cfg.OnRefused = func(svc endpoints.ServiceKey, err error) {
			parts.events.Warn(svc.Namespace, svc.Name, events.ReasonKernelRefused, "the kernel refuses this Service's rules; svcproxy retries every sync: "+err.Error())
		}
		fp.proxy = proxy.New(cfg)
		fps = append(fps, fp)
	}
	return fps
}

// cleanup deletes svcproxy's tables of both families (the main table, then the
// anchor table) and, unless --takeover=false, what kube-proxy left.
func cleanup(ctx context.Context, o *Options, env serveEnv) error {
	for _, f := range []endpoints.Family{endpoints.IPv4, endpoints.IPv6} {
		for _, table := range []string{proxy.TableName, proxy.AnchorTableName} {
			err := env.kernel(f).DeleteTable(ctx, proxy.TableFamily(f), table)
			if f == endpoints.IPv6 && errors.Is(err, unix.EAFNOSUPPORT) {
				continue // a kernel without ip6 nf_tables holds no such table
			}
			if err != nil {
				return fmt.Errorf("cleanup: %w", err)
			}
			klog.InfoS("Removed svcproxy's nftables table", "table", proxy.TableFamily(f).String()+" "+table)
		}
	}
	// Like kube-proxy --cleanup, which removes every mode's rules; with
	// --takeover=false only ours, for the way back once kube-proxy serves.
	if o.NoTakeover {
		return nil
	}
	if err := takeover.RunAndLog(ctx, takeover.Options{}, nil); err != nil {
		return fmt.Errorf("cleanup of kube-proxy's rules: %w", err)
	}
	return nil
}

func metricsHandler(reg *prometheus.Registry, o *Options) (http.Handler, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(withComponentBaseMetrics(reg), promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	return mux, addKubeProxyEndpoints(mux, o.Config)
}

// listen serves h on addr until ctx ends; an empty addr disables the server.
func listen(ctx context.Context, what, addr string, h http.Handler) error {
	if addr == "" {
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s server on %s: %w", what, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Server stopped", "server", what)
		}
	}()
	klog.InfoS("Serving", "server", what, "address", l.Addr().String())
	return nil
}

func nodeName(o *Options) string {
	if o.HostnameOverride != "" {
		return strings.ToLower(strings.TrimSpace(o.HostnameOverride))
	}
	h, _ := os.Hostname()
	return strings.ToLower(h)
}

// watchCluster watches like kube-proxy's informers: Services and EndpointSlices,
// minus those another proxy owns and headless ones, feeding every family's
// tracker, but without a cache of its own (the trackers hold the only copy), so
// configSyncPeriod's resync has nothing to do. They retry a refused or failed
// List/Watch every 250 ms themselves (endpoints.RetryingListerWatcher), so a
// change made right after an API server outage arrives at once rather than
// after client-go's backoff of up to a minute.
func watchCluster(ctx context.Context, client cluster, trackers []*endpoints.Tracker) (func(context.Context) bool, error) {
	inf := endpoints.NewInformers(client.endpointsClients(), func(lo *metav1.ListOptions) {
		lo.LabelSelector = "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless"
	}, endpoints.RetryOptions{})
	synced, err := endpoints.RegisterSynced(inf, trackers...)
	if err != nil {
		return nil, err
	}
	inf.Start(ctx.Done())
	return func(ctx context.Context) bool {
		// Polled every 10 ms, not cache.WaitForCacheSync's 100: the first sync
		// follows the lists by 50 ms less on average, for a cheap check.
		err := wait.PollUntilContextCancel(ctx, syncedPoll, true, func(context.Context) (bool, error) { return synced(), nil })
		return err == nil
	}, nil
}

// watchServiceCIDRs feeds the cluster's ServiceCIDRs to every family's proxy,
// which drops new connections to their addresses that no Service holds, as
// kube-proxy nftables does. The first sync does not wait for them (kube-proxy's
// does not either): the drops are added by the sync their list triggers.
func watchServiceCIDRs(ctx context.Context, client cluster, fps familyProxies, invalid *prometheus.CounterVec) {
	var tr *endpoints.ServiceCIDRTracker
	tr = endpoints.NewServiceCIDRTracker(endpoints.ServiceCIDRTrackerOptions{
		OnInvalid: func(kind, _, name, reason string) {
			klog.InfoS("Skipping malformed input", "kind", kind, "object", name, "reason", reason)
			invalid.WithLabelValues(kind).Inc()
		},
		OnChange: func() {
			for _, fp := range fps {
				fp.proxy.SetServiceCIDRs(tr.CIDRs(fp.family))
			}
		},
	})
	endpoints.NewServiceCIDRInformer(client.networking, tr, endpoints.ServiceCIDROptions{WatchList: client.watchList}).Start(ctx.Done())
}

// syncedPoll is how often the informers' having synced is checked.
const syncedPoll = 10 * time.Millisecond
