package main

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// options are svcproxy's flags: kube-proxy's names and defaults where the flag exists.
type options struct {
	kubeconfig, master, hostnameOverride string
	clusterCIDR                          string
	masqueradeAll                        bool
	syncPeriod, minSyncPeriod            time.Duration
	metricsAddr, healthzAddr             string
	cleanup                              bool
	manifests                            string
	noTakeover                           bool // --takeover=false
	ignored                              map[string]*string
}

// kubeProxyFlags are kube-proxy flags that do not apply to this proxy. They are
// accepted so that svcproxy can replace kube-proxy in an existing DaemonSet; setting
// one logs a warning.
var kubeProxyFlags = []string{
	"bind-address", "bind-address-hard-fail", "boot-id-file", "config", "config-sync-period",
	"conntrack-max-per-core", "conntrack-min", "conntrack-tcp-be-liberal", "conntrack-tcp-timeout-close-wait",
	"conntrack-tcp-timeout-established", "conntrack-udp-timeout", "conntrack-udp-timeout-stream",
	"detect-local-mode", "feature-gates", "init-only", "iptables-localhost-nodeports",
	"iptables-masquerade-bit", "iptables-min-sync-period", "iptables-sync-period", "ipvs-exclude-cidrs",
	"ipvs-min-sync-period", "ipvs-scheduler", "ipvs-strict-arp", "ipvs-sync-period", "ipvs-tcp-timeout",
	"ipvs-tcpfin-timeout", "ipvs-udp-timeout", "kube-api-burst", "kube-api-content-type", "kube-api-qps",
	"log-flush-frequency", "logging-format", "nodeport-addresses", "oom-score-adj", "pod-bridge-interface",
	"pod-interface-name-prefix", "profiling", "proxy-mode", "proxy-port-range", "show-hidden-metrics-for-version",
	"write-config-to", "localhost-nodeports", "healthz-port", "metrics-port", "log-json-split-stream",
	"log-json-info-buffer-size", "log-text-split-stream", "log-text-info-buffer-size",
}

// kubeProxyBoolFlags are the boolean ones among kubeProxyFlags: like kube-proxy's,
// they take no value unless given with "=", so they must not swallow the next flag.
var kubeProxyBoolFlags = map[string]bool{
	"bind-address-hard-fail": true, "conntrack-tcp-be-liberal": true, "init-only": true,
	"iptables-localhost-nodeports": true, "ipvs-strict-arp": true, "localhost-nodeports": true,
	"profiling": true, "log-json-split-stream": true, "log-text-split-stream": true,
}

func parseFlags(args []string) (*options, error) {
	o := &options{ignored: map[string]*string{}}
	fs := pflag.NewFlagSet("svcproxy", pflag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to kubeconfig file with authorization information (in-cluster config when empty).")
	fs.StringVar(&o.master, "master", "", "The address of the Kubernetes API server (overrides any value in kubeconfig).")
	fs.StringVar(&o.hostnameOverride, "hostname-override", "", "If non-empty, use this name as the node's name instead of the hostname.")
	fs.StringVar(&o.clusterCIDR, "cluster-cidr", "", "The CIDR range of pods in the cluster; service traffic from outside it is masqueraded.")
	fs.BoolVar(&o.masqueradeAll, "masquerade-all", false, "SNAT all traffic sent via Service cluster IPs.")
	fs.DurationVar(&o.syncPeriod, "sync-period", 30*time.Second, "How often the kernel's table is re-read and repaired.")
	fs.DurationVar(&o.minSyncPeriod, "min-sync-period", time.Second, "Minimum interval between syncs when changes arrive in bursts; the first change after a quiet period is synced at once.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "127.0.0.1:10249", "IP:port for the metrics server (empty to disable).")
	fs.StringVar(&o.healthzAddr, "healthz-bind-address", "0.0.0.0:10256", "IP:port for the health check server, serving /healthz and /livez (empty to disable).")
	fs.BoolVar(&o.cleanup, "cleanup", false, "Remove everything svcproxy installed in the kernel, and what kube-proxy left there, then exit.")
	fs.StringVar(&o.manifests, "manifests", "", "Run without a cluster: read Services and EndpointSlices from YAML files in this directory (re-read on change).")
	addTakeoverFlag(fs, o)
	for _, name := range kubeProxyFlags {
		o.ignored[name] = fs.String(name, "", "Accepted for kube-proxy compatibility; has no effect.")
		if kubeProxyBoolFlags[name] {
			fs.Lookup(name).NoOptDefVal = "true"
		}
		_ = fs.MarkHidden(name)
	}
	gofs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(gofs)
	fs.AddGoFlagSet(gofs)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	warnUnknown(fs, args)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	for name, v := range o.ignored {
		if fs.Changed(name) {
			klog.InfoS("Warning: kube-proxy flag has no effect in svcproxy", "flag", "--"+name, "value", *v)
		}
	}
	if err := o.validateClusterCIDR(); err != nil {
		return nil, err
	}
	return o, nil
}

// validateClusterCIDR accepts a prefix or a dual-stack pair, like kube-proxy.
func (o *options) validateClusterCIDR() error {
	if o.clusterCIDR == "" {
		return nil
	}
	for _, c := range strings.Split(o.clusterCIDR, ",") {
		if _, err := netip.ParsePrefix(strings.TrimSpace(c)); err != nil {
			return fmt.Errorf("--cluster-cidr %q: %w", o.clusterCIDR, err)
		}
	}
	return nil
}

// warnUnknown logs flags that neither svcproxy nor kube-proxy define; they are
// skipped rather than failing the start.
func warnUnknown(fs *pflag.FlagSet, args []string) {
	for _, a := range args {
		if a == "--" {
			return // what follows is not flags
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue
		}
		name := strings.TrimLeft(a, "-")
		name, _, _ = strings.Cut(name, "=")
		if !strings.HasPrefix(a, "--") && len(name) > 1 && fs.ShorthandLookup(name[:1]) != nil {
			continue // -v2 is -v=2
		}
		if fs.Lookup(name) == nil && (len(name) != 1 || fs.ShorthandLookup(name) == nil) {
			fmt.Fprintf(os.Stderr, "Warning: unknown flag --%s ignored\n", name)
		}
	}
}

// ipv4ClusterCIDR picks the IPv4 entry of a (possibly dual-stack) --cluster-cidr.
func (o *options) ipv4ClusterCIDR() netip.Prefix {
	for _, c := range strings.Split(o.clusterCIDR, ",") {
		if p, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil && p.Addr().Is4() {
			return p
		}
	}
	return netip.Prefix{}
}
