package agent

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/events"
	"github.com/svcproxy/svcproxy/pkg/healthcheck"
	"github.com/svcproxy/svcproxy/pkg/node"
	"github.com/svcproxy/svcproxy/pkg/nodeaddr"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

// newHealthCheckServer is the health check node port server of Local Services:
// a port that cannot be bound gets kube-proxy's Warning Event and counts in
// svcproxy_healthcheck_nodeport_listen_failures_total.
func newHealthCheckServer(reg prometheus.Registerer, recorder *events.Recorder, node string, health *proxy.Health) *healthcheck.Server {
	return healthcheck.New(healthcheck.Config{
		Healthy:        health.Healthy,
		ListenFailures: healthcheck.NewListenFailures(reg),
		OnListenError: func(svc endpoints.ServiceKey, port uint16, err error) {
			recorder.Warn(svc.Namespace, svc.Name, events.ReasonFailedHealthCheck,
				fmt.Sprintf("node %s failed to start healthcheck %q on port %d: %v", node, svc.String(), port, err))
		},
	})
}

// watchNodePortAddresses keeps the proxy's NodePort addresses and the health check
// ports' listen addresses on what --nodeport-addresses selects among the node's
// interface addresses, as these change. thisNode (nil without a cluster) gives the
// primary IPs for the 'primary' keyword, with --bind-address, and their changes:
// kube-proxy exits when they change, svcproxy selects again.
func watchNodePortAddresses(ctx context.Context, o *Options, thisNode *node.Watcher, netNS int, fps familyProxies, hc *healthcheck.Server) error {
	primaryIPs := func() []netip.Addr {
		var status []corev1.NodeAddress
		if thisNode != nil {
			status = thisNode.Addresses()
		}
		return nodeaddr.PrimaryIPs(status, o.BindAddress)
	}
	primary := primaryIPs()
	if o.NodePorts.Primary {
		klog.InfoS("NodePort address 'primary' resolved", "primaryIPs", primary)
	}
	w, err := nodeaddr.Start(ctx, nodeaddr.WatchConfig{
		Spec:    o.NodePorts,
		Primary: primary,
		Resync:  o.SyncPeriod,
		NetNS:   netNS,
		OnChange: func(sel nodeaddr.Selection) {
			fps.setNodeAddresses(sel)
			hc.SetAddresses(fps.served(sel))
		},
	})
	if err != nil || thisNode == nil || !o.NodePorts.Primary {
		return err
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-thisNode.Changed():
				w.SetPrimary(primaryIPs())
			}
		}
	}()
	return nil
}
