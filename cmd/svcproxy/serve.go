package main

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/conntrack"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
	"github.com/svcproxy/svcproxy/pkg/proxy"
	"github.com/svcproxy/svcproxy/pkg/takeover"
)

func serve(ctx context.Context, o *options) error {
	kernel := &nft.Netlink{}
	if o.cleanup {
		if err := kernel.DeleteTable(ctx, nft.FamilyIPv4, proxy.TableName); err != nil {
			return fmt.Errorf("cleanup: %w", err)
		}
		klog.InfoS("Removed svcproxy's nftables table", "table", "ip "+proxy.TableName)
		// Like kube-proxy --cleanup, which removes every mode's rules; with
		// --takeover=false only ours, for the way back once kube-proxy serves.
		if o.noTakeover {
			return nil
		}
		if err := takeOver(ctx, takeover.Options{}, nil); err != nil {
			return fmt.Errorf("cleanup of kube-proxy's rules: %w", err)
		}
		return nil
	}

	applyOOMScoreAdj(o.config.OOMScoreAdj)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := proxy.NewMetrics(reg)
	takeoverRemoved := newTakeoverMetric(reg)
	health := &proxy.Health{Timeout: 2 * o.syncPeriod, Metrics: metrics}

	var p *proxy.Proxy
	events := &Events{} // log only until connected to a cluster
	defer events.Shutdown()
	tracker := endpoints.NewTracker(endpoints.TrackerOptions{
		OnInvalid: func(kind, ns, name, reason string) {
			klog.InfoS("Skipping malformed input", "kind", kind, "object", ns+"/"+name, "reason", reason)
			metrics.InvalidObjects.WithLabelValues(kind).Inc()
		},
		OnChange:   func() { p.Trigger() },
		OnConflict: conflictReporter(events, metrics.ConflictingServices),
		Counts:     metrics,
	})
	ct, err := conntrack.New(0)
	if err != nil {
		klog.ErrorS(err, "No conntrack cleanup for UDP and SCTP Services")
	}
	hc := newHealthCheckServer(reg, events, nodeName(o), health)
	hc.CloseOnDone(ctx)
	cfg := proxy.Config{
		Options: proxy.Options{ClusterCIDR: o.ipv4ClusterCIDR(), MasqueradeAll: o.masqueradeAll, NodeName: nodeName(o),
			LocalhostNodePorts: o.localhostNodePorts, ConntrackTCPLiberal: proxy.ReadConntrackTCPLiberal()},
		Tracker:       tracker,
		Kernel:        kernel,
		Metrics:       metrics,
		Health:        health,
		SyncPeriod:    o.syncPeriod,
		MinSyncPeriod: o.minSyncPeriod,
		// route_localnet for localhost NodePorts, in the namespace svcproxy runs in.
		SetSysctl: proxy.WriteProcSys,
	}
	if ct != nil {
		cfg.Conntrack = ct
	}
	cfg.OnHealthCheckServices = healthCheckHook(hc)
	if !o.noTakeover {
		cfg.OnSynced = takeoverAfterSync(ctx, takeoverRemoved)
	}
	cfg.OnRefused = func(svc endpoints.ServiceKey, err error) {
		events.Warn(svc.Namespace, svc.Name, ReasonKernelRefused, "the kernel refuses this Service's rules; svcproxy retries every sync: "+err.Error())
	}
	p = proxy.New(cfg)

	mh, err := metricsHandler(reg, o)
	if err != nil {
		return err
	}
	if err := listen(ctx, "metrics", o.metricsAddr, mh); err != nil {
		return err
	}

	var waitReady func(context.Context) bool
	var node *nodeWatch // this node's Node object (nil without a cluster)
	if o.manifests != "" {
		if err := listen(ctx, "healthz", o.healthzAddr, health.Handler()); err != nil {
			return err
		}
		waitReady, err = watchManifests(ctx, o.manifests, tracker, metrics.ManifestErrors)
	} else {
		var client cluster
		if client, err = clusterClient(o); err != nil {
			return err
		}
		events.connect(client, nodeName(o), trackerUID(tracker))
		// Like kube-proxy, /healthz answers once this node's Node is known
		// (or nodeWait passed), so that its first answer is right.
		nw := watchNode(ctx, client, nodeName(o), nodeWait)
		node = &nw
		health.SetNodeEligible(node.Eligible)
		if err := listen(ctx, "healthz", o.healthzAddr, health.Handler()); err != nil {
			return err
		}
		waitReady, err = watchCluster(ctx, client, tracker, o.config.ConfigSyncPeriod.Duration)
	}
	if err != nil {
		return err
	}
	// Before the first sync, so that it already serves NodePorts where it should.
	if err := watchNodePortAddresses(ctx, o, node, p, hc); err != nil {
		return err
	}
	// kube-proxy's "birth cry": after the informers start, before the sync loop.
	events.Started(ctx)
	klog.InfoS("svcproxy started", "table", "ip "+proxy.TableName, "node", nodeName(o))
	return p.Run(ctx, waitReady)
}

func metricsHandler(reg *prometheus.Registry, o *options) (http.Handler, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(withComponentBaseMetrics(reg), promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	return mux, addKubeProxyEndpoints(mux, o.config)
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

func nodeName(o *options) string {
	if o.hostnameOverride != "" {
		return strings.ToLower(strings.TrimSpace(o.hostnameOverride))
	}
	h, _ := os.Hostname()
	return strings.ToLower(h)
}

// watchCluster starts informers like kube-proxy's: Services and EndpointSlices,
// minus those another proxy owns and headless ones. They retry a refused or
// failed List/Watch every 250 ms themselves (endpoints.RetryingListerWatcher),
// so a change made right after an API server outage arrives at once rather
// than after client-go's backoff of up to a minute.
func watchCluster(ctx context.Context, client cluster, tracker *endpoints.Tracker, resync time.Duration) (func(context.Context) bool, error) {
	inf := endpoints.NewInformers(client.endpointsClients(), resync, func(lo *metav1.ListOptions) {
		lo.LabelSelector = "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless"
	}, endpoints.RetryOptions{})
	synced, err := endpoints.RegisterSynced(inf, tracker)
	if err != nil {
		return nil, err
	}
	inf.Start(ctx.Done())
	return func(ctx context.Context) bool {
		return cache.WaitForCacheSync(ctx.Done(), synced)
	}, nil
}
