package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/svcproxy/svcproxy/pkg/agent"
	"github.com/svcproxy/svcproxy/pkg/config"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/version/verflag"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
)

// options is svcproxy's resolved configuration: kube-proxy's flags and
// KubeProxyConfiguration file, merged with kube-proxy's precedence, plus svcproxy's
// own flags. What the running proxy needs is agent.Options.
type options struct {
	agent.Options

	configFile, writeConfigTo string
	// configStamp is the --config file's stamp before it was read (config.WatchFile).
	configStamp string
	initOnly    bool
	// gates holds the feature gates svcproxy knows (the logging ones).
	gates featuregate.FeatureGate
	// warnings are logged once logging is configured.
	warnings []config.Warning
	ignored  map[string]*string
}

// kubeProxyFlags are kube-proxy flags that do not apply to this proxy and have no
// place in the configuration file. They are accepted so that svcproxy can replace
// kube-proxy in an existing DaemonSet; setting one logs a warning.
var kubeProxyFlags = []string{"boot-id-file", "proxy-port-range", "localhost-nodeports"}

// kubeProxyBoolFlags are the boolean ones among kubeProxyFlags: like kube-proxy's,
// they take no value unless given with "=", so they must not swallow the next flag.
var kubeProxyBoolFlags = map[string]bool{"localhost-nodeports": true}

// flagsKeptWithConfig are the flags kube-proxy still honours when --config is given
// (its Options fields outside the configuration, --hostname-override, and the
// logging flags, copied over the file's logging section), plus svcproxy's own
// --manifests and --takeover. Any other flag is ignored then, as kube-proxy ignores it.
var flagsKeptWithConfig = map[string]bool{
	"config": true, "write-config-to": true, "cleanup": true, "init-only": true, "master": true,
	"hostname-override": true, "version": true, "manifests": true, "takeover": true,
}

// modeFlags are the sync-period flags whose target depends on the proxy mode,
// parsed into locals and applied after --proxy-mode is known.
type modeFlags struct {
	syncPeriod, minSyncPeriod                 time.Duration
	iptablesSyncPeriod, iptablesMinSyncPeriod time.Duration
	ipvsSyncPeriod, ipvsMinSyncPeriod         time.Duration
	masqueradeAll                             bool
	healthzPort, metricsPort                  int32
}

func parseFlags(args []string) (*options, error) {
	o := &options{ignored: map[string]*string{}}
	cfg := config.Default()
	var mf modeFlags
	var minSyncSet bool
	fs := pflag.NewFlagSet("svcproxy", pflag.ContinueOnError)
	addFlags(fs, o, cfg, &mf)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	warnUnknown(fs, args)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	for name, v := range o.ignored {
		if fs.Changed(name) {
			o.warn("Warning: kube-proxy flag has no effect in svcproxy", "flag", "--"+name, "value", *v)
		}
	}
	if o.configFile != "" {
		file, err := config.Load(o.configFile)
		if err != nil {
			return nil, err
		}
		o.warnings = append(o.warnings, file.Warnings...)
		if err := copyLoggingFlags(fs, &file.Config.Logging); err != nil {
			return nil, err
		}
		fs.Visit(func(f *pflag.Flag) {
			if !flagsKeptWithConfig[f.Name] && !isLoggingFlag(f.Name) && o.ignored[f.Name] == nil {
				o.warn("Warning: flag ignored because --config is given, as kube-proxy ignores it", "flag", "--"+f.Name)
			}
		})
		cfg, minSyncSet, o.configStamp = file.Config, file.MinSyncPeriodSet, file.Stamp
	} else {
		minSyncSet = mf.apply(fs, cfg)
	}
	if fs.Changed("hostname-override") {
		name := strings.TrimSpace(o.HostnameOverride)
		if name == "" && o.HostnameOverride != "" {
			return nil, fmt.Errorf("empty hostname-override is invalid")
		}
		if name != "" {
			cfg.HostnameOverride = strings.ToLower(name)
		}
	}
	gates, warnings, err := config.Check(cfg)
	if err != nil {
		return nil, err
	}
	o.gates = gates
	o.warnings = append(o.warnings, warnings...)
	if err := o.SetConfig(cfg); err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	o.MinSyncPeriodSet = minSyncSet
	return o, nil
}

func addFlags(fs *pflag.FlagSet, o *options, cfg *kubeproxyconfig.KubeProxyConfiguration, mf *modeFlags) {
	// svcproxy's own flags.
	fs.BoolVar(&o.Cleanup, "cleanup", false, "Remove everything svcproxy installed in the kernel, and what kube-proxy left there, then exit.")
	fs.StringVar(&o.Manifests, "manifests", "", "Run without a cluster: read Services and EndpointSlices from YAML files in this directory (re-read on change).")
	addTakeoverFlag(fs, o)
	fs.StringVar(&o.SysctlDir, "sysctl-dir", "/proc/sys", "Where the node's /proc/sys is, for the sysctls svcproxy writes in its network namespace (route_localnet for localhost NodePorts, the conntrack timeouts): a pod that is not privileged mounts the node's /proc/sys/net writable elsewhere, as deploy/ does.")
	fs.DurationVar(&mf.syncPeriod, "sync-period", cfg.IPTables.SyncPeriod.Duration, "How often the kernel's table is re-read and repaired (svcproxy's name for --iptables-sync-period).")
	fs.DurationVar(&mf.minSyncPeriod, "min-sync-period", cfg.IPTables.MinSyncPeriod.Duration, "Minimum interval between syncs when changes arrive in bursts, as kube-proxy's; the first change after a quiet period is synced at once (svcproxy's name for --iptables-min-sync-period). Not given (nor in --config): syncs under a burst are spaced by nine times their CPU cost, at most this default apart.")

	// kube-proxy's flags, bound to the configuration they set, with its defaults.
	fs.StringVar(&o.configFile, "config", "", "The path to a KubeProxyConfiguration file (kubeproxy.config.k8s.io/v1alpha1). When given, other flags are ignored except --hostname-override, --master, --cleanup and the logging flags, as in kube-proxy.")
	fs.StringVar(&o.writeConfigTo, "write-config-to", "", "If set, write the effective configuration to this file and exit.")
	fs.BoolVar(&o.initOnly, "init-only", false, "Accepted for kube-proxy compatibility: svcproxy needs no privileged initialization, so it exits at once.")
	fs.StringVar(&cfg.ClientConnection.Kubeconfig, "kubeconfig", "", "Path to kubeconfig file with authorization information (in-cluster config when empty).")
	fs.StringVar(&o.Master, "master", "", "The address of the Kubernetes API server (overrides any value in kubeconfig).")
	fs.StringVar(&cfg.ClientConnection.ContentType, "kube-api-content-type", cfg.ClientConnection.ContentType, "Content type of requests sent to apiserver.")
	fs.Int32Var(&cfg.ClientConnection.Burst, "kube-api-burst", cfg.ClientConnection.Burst, "Burst to use while talking with kubernetes apiserver.")
	fs.Float32Var(&cfg.ClientConnection.QPS, "kube-api-qps", cfg.ClientConnection.QPS, "QPS to use while talking with kubernetes apiserver.")
	fs.StringVar(&o.HostnameOverride, "hostname-override", "", "If non-empty, use this name as the node's name instead of the hostname.")
	fs.StringVar(&cfg.ClusterCIDR, "cluster-cidr", "", "The CIDR range of pods in the cluster (or a dual-stack pair); service traffic from outside it is masqueraded.")
	fs.BoolVar(&mf.masqueradeAll, "masquerade-all", false, "SNAT all traffic sent via Service cluster IPs.")
	fs.StringVar(&cfg.MetricsBindAddress, "metrics-bind-address", cfg.MetricsBindAddress, "IP:port for the metrics server, serving /metrics, /healthz, /proxyMode and /configz (empty to disable).")
	fs.StringVar(&cfg.HealthzBindAddress, "healthz-bind-address", cfg.HealthzBindAddress, "IP:port for the health check server, serving /healthz and /livez (empty to disable).")
	fs.StringVar(&cfg.BindAddress, "bind-address", cfg.BindAddress, "The node's primary IP when not 0.0.0.0 or :: (overrides the Node object's for --nodeport-addresses=primary); its family also picks the default server addresses.")
	fs.BoolVar(&cfg.BindAddressHardFail, "bind-address-hard-fail", false, "Accepted for kube-proxy compatibility: svcproxy always exits when a server cannot bind.")
	fs.BoolVar(&cfg.EnableProfiling, "profiling", false, "Serve /debug/pprof on the metrics address.")
	fs.StringVar(&cfg.ShowHiddenMetricsForVersion, "show-hidden-metrics-for-version", "", "Accepted for kube-proxy compatibility: svcproxy hides no metrics.")
	fs.StringVar((*string)(&cfg.Mode), "proxy-mode", "", "Accepted for kube-proxy compatibility: svcproxy always programs nftables; ipvs is warned about.")
	fs.DurationVar(&mf.iptablesSyncPeriod, "iptables-sync-period", cfg.IPTables.SyncPeriod.Duration, "Like kube-proxy: the sync period, unless the mode is ipvs.")
	fs.DurationVar(&mf.iptablesMinSyncPeriod, "iptables-min-sync-period", cfg.IPTables.MinSyncPeriod.Duration, "Like kube-proxy: the minimum sync period, unless the mode is ipvs.")
	fs.DurationVar(&mf.ipvsSyncPeriod, "ipvs-sync-period", cfg.IPVS.SyncPeriod.Duration, "Like kube-proxy: the sync period in ipvs mode.")
	fs.DurationVar(&mf.ipvsMinSyncPeriod, "ipvs-min-sync-period", cfg.IPVS.MinSyncPeriod.Duration, "Like kube-proxy: the minimum sync period in ipvs mode.")
	fs.Int32Var(cfg.IPTables.MasqueradeBit, "iptables-masquerade-bit", *cfg.IPTables.MasqueradeBit, "Accepted for kube-proxy compatibility (svcproxy marks no packets).")
	fs.BoolVar(cfg.IPTables.LocalhostNodePorts, "iptables-localhost-nodeports", *cfg.IPTables.LocalhostNodePorts, "If false, NodePorts do not answer on 127.0.0.1 (as in kube-proxy, only in iptables or blank mode: nftables mode never serves them).")
	fs.StringVar(&cfg.IPVS.Scheduler, "ipvs-scheduler", "", "Accepted for kube-proxy compatibility (ipvs mode).")
	fs.StringSliceVar(&cfg.IPVS.ExcludeCIDRs, "ipvs-exclude-cidrs", nil, "Accepted for kube-proxy compatibility (ipvs mode).")
	fs.BoolVar(&cfg.IPVS.StrictARP, "ipvs-strict-arp", false, "Accepted for kube-proxy compatibility (ipvs mode).")
	fs.DurationVar(&cfg.IPVS.TCPTimeout.Duration, "ipvs-tcp-timeout", 0, "Accepted for kube-proxy compatibility (ipvs mode).")
	fs.DurationVar(&cfg.IPVS.TCPFinTimeout.Duration, "ipvs-tcpfin-timeout", 0, "Accepted for kube-proxy compatibility (ipvs mode).")
	fs.DurationVar(&cfg.IPVS.UDPTimeout.Duration, "ipvs-udp-timeout", 0, "Accepted for kube-proxy compatibility (ipvs mode).")
	fs.StringVar((*string)(&cfg.DetectLocalMode), "detect-local-mode", "", "Only ClusterCIDR (the default) applies in svcproxy.")
	fs.StringVar(&cfg.DetectLocal.BridgeInterface, "pod-bridge-interface", "", "Accepted for kube-proxy compatibility (detect-local-mode BridgeInterface).")
	fs.StringVar(&cfg.DetectLocal.InterfaceNamePrefix, "pod-interface-name-prefix", "", "Accepted for kube-proxy compatibility (detect-local-mode InterfaceNamePrefix).")
	fs.StringSliceVar(&cfg.NodePortAddresses, "nodeport-addresses", nil, "The node addresses NodePorts and health check node ports answer on: CIDRs and the keywords 'primary' (the Node's primary IPs, or --bind-address), 'localhost', 'all', in any combination. Default: all local addresses ('primary' in nftables mode), followed as interface addresses change.")
	fs.Int32Var(cfg.OOMScoreAdj, "oom-score-adj", *cfg.OOMScoreAdj, "The oom_score_adj value for the svcproxy process, within [-1000, 1000].")
	fs.Int32Var(cfg.Conntrack.MaxPerCore, "conntrack-max-per-core", *cfg.Conntrack.MaxPerCore, "Accepted for kube-proxy compatibility: svcproxy does not change nf_conntrack_max, which is the machine's, not the namespace's.")
	fs.Int32Var(cfg.Conntrack.Min, "conntrack-min", *cfg.Conntrack.Min, "Accepted for kube-proxy compatibility: svcproxy does not change nf_conntrack_max, which is the machine's, not the namespace's.")
	fs.DurationVar(&cfg.Conntrack.TCPEstablishedTimeout.Duration, "conntrack-tcp-timeout-established", cfg.Conntrack.TCPEstablishedTimeout.Duration, "Idle timeout for established TCP connections, written at start into the node's network namespace (0 to leave the kernel's value).")
	fs.DurationVar(&cfg.Conntrack.TCPCloseWaitTimeout.Duration, "conntrack-tcp-timeout-close-wait", cfg.Conntrack.TCPCloseWaitTimeout.Duration, "Timeout of TCP connections in CLOSE_WAIT, written at start into the node's network namespace (0 to leave the kernel's value).")
	fs.BoolVar(&cfg.Conntrack.TCPBeLiberal, "conntrack-tcp-be-liberal", false, "Set nf_conntrack_tcp_be_liberal=1 in the node's network namespace at start (out-of-window packets are not marked INVALID).")
	fs.DurationVar(&cfg.Conntrack.UDPTimeout.Duration, "conntrack-udp-timeout", 0, "Idle timeout for UNREPLIED UDP flows, written at start into the node's network namespace (0 to leave the kernel's value).")
	fs.DurationVar(&cfg.Conntrack.UDPStreamTimeout.Duration, "conntrack-udp-timeout-stream", 0, "Idle timeout for ASSURED UDP flows, written at start into the node's network namespace (0 to leave the kernel's value).")
	fs.DurationVar(&cfg.ConfigSyncPeriod.Duration, "config-sync-period", cfg.ConfigSyncPeriod.Duration, "Accepted for kube-proxy compatibility; svcproxy keeps no informer cache to resync.")
	fs.Var(cliflag.NewMapStringBool(&cfg.FeatureGates), "feature-gates", "key=value pairs; svcproxy knows the logging gates (LoggingAlphaOptions, LoggingBetaOptions, ContextualLogging) and warns about others.")
	fs.Int32Var(&mf.healthzPort, "healthz-port", config.HealthzPort, "Deprecated: the health check server's port, 0 to disable.")
	fs.Int32Var(&mf.metricsPort, "metrics-port", config.StatusPort, "Deprecated: the metrics server's port, 0 to disable.")
	for _, name := range kubeProxyFlags {
		o.ignored[name] = fs.String(name, "", "Accepted for kube-proxy compatibility; has no effect.")
		if kubeProxyBoolFlags[name] {
			fs.Lookup(name).NoOptDefVal = "true"
		}
		_ = fs.MarkHidden(name)
	}
	logsapi.AddFlags(&cfg.Logging, fs)
	verflag.AddFlags(fs)
}

// apply sets what the mode-dependent flags mean once the mode is known, as
// kube-proxy does without a configuration file: --iptables-* set the sync periods
// unless the mode is ipvs, --ipvs-* only in ipvs mode. svcproxy's --sync-period and
// --min-sync-period set them in every mode. It reports whether a min sync period
// flag that applies was given.
func (mf *modeFlags) apply(fs *pflag.FlagSet, cfg *kubeproxyconfig.KubeProxyConfiguration) (minSyncSet bool) {
	sync, minSync, masq, _ := config.ModeSection(cfg)
	ipvs := cfg.Mode == config.ModeIPVS
	for _, f := range []struct {
		name  string
		when  bool
		value time.Duration
		to    *time.Duration
	}{
		{"iptables-sync-period", !ipvs, mf.iptablesSyncPeriod, &sync.Duration},
		{"iptables-min-sync-period", !ipvs, mf.iptablesMinSyncPeriod, &minSync.Duration},
		{"ipvs-sync-period", ipvs, mf.ipvsSyncPeriod, &sync.Duration},
		{"ipvs-min-sync-period", ipvs, mf.ipvsMinSyncPeriod, &minSync.Duration},
		{"sync-period", true, mf.syncPeriod, &sync.Duration},
		{"min-sync-period", true, mf.minSyncPeriod, &minSync.Duration},
	} {
		if f.when && fs.Changed(f.name) {
			*f.to = f.value
			minSyncSet = minSyncSet || f.to == &minSync.Duration
		}
	}
	if fs.Changed("masquerade-all") {
		*masq = mf.masqueradeAll
	}
	// kube-proxy's deprecated port flags: 0 disables the server, another port is
	// added to an address that lacks one.
	cfg.HealthzBindAddress = addressFromPortFlag(cfg.HealthzBindAddress, mf.healthzPort)
	cfg.MetricsBindAddress = addressFromPortFlag(cfg.MetricsBindAddress, mf.metricsPort)
	return minSyncSet
}

func addressFromPortFlag(addr string, port int32) string {
	if port == 0 {
		return ""
	}
	if addr == "" {
		return ""
	}
	return config.AddressOrDefault(addr, "", int(port))
}

// copyLoggingFlags lets logging flags given on the command line override the file's
// logging section, as kube-proxy does, so that `--config ... -v=5` works; vmodule
// settings are joined, the flags' first.
func copyLoggingFlags(from *pflag.FlagSet, to *logsapi.LoggingConfiguration) error {
	// AddFlags resets the split-stream booleans to false (their flag default);
	// kube-proxy loses the file's values there, svcproxy keeps them.
	textSplit, jsonSplit := to.Options.Text.SplitStream, to.Options.JSON.SplitStream
	var clone pflag.FlagSet
	logsapi.AddFlags(to, &clone)
	to.Options.Text.SplitStream, to.Options.JSON.SplitStream = textSplit, jsonSplit
	vmodule := to.VModule
	to.VModule = nil
	var err error
	clone.VisitAll(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		src := from.Lookup(f.Name)
		if src == nil || !src.Changed {
			return
		}
		if setErr := f.Value.Set(src.Value.String()); setErr != nil {
			err = fmt.Errorf("copying flag --%s: %w", f.Name, setErr)
		}
	})
	to.VModule = append(to.VModule, vmodule...)
	return err
}

// isLoggingFlag reports whether name is one of component-base's logging flags.
func isLoggingFlag(name string) bool {
	var fs pflag.FlagSet
	logsapi.AddFlags(logsapi.NewLoggingConfiguration(), &fs)
	return fs.Lookup(name) != nil
}

func (o *options) warn(msg string, kv ...any) {
	o.warnings = append(o.warnings, config.Warning{Msg: msg, KV: kv})
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
