package agent

import (
	"time"

	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/svcproxy/svcproxy/pkg/config"
	"github.com/svcproxy/svcproxy/pkg/nodeaddr"
)

// Options are what the running proxy needs: the effective KubeProxyConfiguration
// and what is read from it (SetConfig), plus svcproxy's own flags.
type Options struct {
	Kubeconfig, Master, HostnameOverride string
	ClusterCIDR                          string
	MasqueradeAll                        bool
	SyncPeriod, MinSyncPeriod            time.Duration
	// MinSyncPeriodSet: the flags or the file gave the mode's min sync period, and
	// syncs under a burst are that far apart as with kube-proxy. Unset, syncs are
	// spaced by their cost, MinSyncPeriod (kube-proxy's 1 s default) the most
	// (proxy.Config.SpaceByCost).
	MinSyncPeriodSet         bool
	MetricsAddr, HealthzAddr string
	Cleanup                  bool   // --cleanup: remove, do not run
	Manifests                string // --manifests: run on this directory, no cluster

	// Config is the effective KubeProxyConfiguration (file or flags, defaulted);
	// the fields above are read from it. /configz serves it.
	Config *kubeproxyconfig.KubeProxyConfiguration

	NoTakeover bool // --takeover=false
	// SysctlDir is where the node's /proc/sys is (--sysctl-dir): deploy/ mounts
	// its /proc/sys/net writable at /host/proc/sys/net, /proc/sys being
	// read-only in a pod that is not privileged.
	SysctlDir string

	// NodePorts is nodePortAddresses parsed, with the mode's default applied.
	NodePorts nodeaddr.Spec
	// LocalhostNodePorts: NodePorts also answer on 127.0.0.1 (iptables mode only).
	LocalhostNodePorts bool
	// BindAddress overrides the Node's primary IP of its family (for `primary`).
	BindAddress string
}

// SetConfig makes cfg the effective configuration and reads what the proxy
// needs out of it.
func (o *Options) SetConfig(cfg *kubeproxyconfig.KubeProxyConfiguration) error {
	o.Config = cfg
	sync, minSync, masq, _ := config.ModeSection(cfg)
	o.Kubeconfig = cfg.ClientConnection.Kubeconfig
	o.HostnameOverride = cfg.HostnameOverride
	o.ClusterCIDR = cfg.ClusterCIDR
	o.MasqueradeAll = *masq
	o.SyncPeriod, o.MinSyncPeriod = sync.Duration, minSync.Duration
	o.MetricsAddr, o.HealthzAddr = cfg.MetricsBindAddress, cfg.HealthzBindAddress
	o.BindAddress = cfg.BindAddress
	var err error
	o.NodePorts, o.LocalhostNodePorts, err = config.NodePorts(cfg)
	return err
}
