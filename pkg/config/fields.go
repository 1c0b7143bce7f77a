package config

import (
	"reflect"
	"sort"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/svcproxy/svcproxy/pkg/conntrack"
)

// inertField is a KubeProxyConfiguration field svcproxy does not act on. Setting it
// to something that asks for behaviour svcproxy lacks logs one warning naming it.
type inertField struct {
	path   string
	why    string
	value  func(c *kubeproxyconfig.KubeProxyConfiguration) any
	asks   func(c *kubeproxyconfig.KubeProxyConfiguration) bool // nil: any value but kube-proxy's default
	inMode func(mode kubeproxyconfig.ProxyMode) bool            // nil: in every mode
}

const (
	whyNoMarks   = "svcproxy masquerades without packet marks"
	whyConntrack = "svcproxy never changes nf_conntrack_max, the machine's (the timeouts are per network namespace and applied)"
	whyOtherMode = "this section is not read in the configured mode (kube-proxy ignores it too)"
	whyIPVS      = "svcproxy does not program IPVS"
	whyWindows   = "Windows only"
)

// appliedFields are the KubeProxyConfiguration fields svcproxy acts on. Some are
// also in inertFields, for the values it cannot honour.
var appliedFields = []string{
	"featureGates",       // the logging gates; others are warned about by Check
	"clientConnection.*", // kubeconfig, content types (protobuf by default), QPS, burst
	"logging",            // component-base: format (text, json), verbosity, vmodule, flush frequency, options
	"hostnameOverride",
	"bindAddress",                                                             // the node's primary IP (nodePortAddresses 'primary'); the default server addresses' IP family
	"healthzBindAddress",                                                      // /healthz and /livez
	"metricsBindAddress",                                                      // /metrics, /healthz, /proxyMode, /configz
	"bindAddressHardFail",                                                     // svcproxy always exits when it cannot bind, as with true
	"enableProfiling",                                                         // /debug/pprof on the metrics address
	"mode",                                                                    // nftables, iptables or blank pick the section below; ipvs is warned about
	"iptables.masqueradeAll", "iptables.syncPeriod", "iptables.minSyncPeriod", // mode iptables or blank
	"nftables.masqueradeAll", "nftables.syncPeriod", "nftables.minSyncPeriod", // mode nftables
	"ipvs.syncPeriod", "ipvs.minSyncPeriod", // mode ipvs
	"clusterCIDR",                 // traffic from outside it is masqueraded
	"oomScoreAdj",                 // written to /proc/self/oom_score_adj
	"configSyncPeriod",            // accepted, nothing to do: no informer cache to resync (the trackers hold the only copy)
	"nodePortAddresses",           // NodePorts and health check node ports on these addresses (default: all; primary in nftables mode)
	"iptables.localhostNodePorts", // NodePorts on 127.0.0.1, in iptables or blank mode
	// Written at start into the node's network namespace (ConntrackTimeouts).
	"conntrack.tcpEstablishedTimeout", "conntrack.tcpCloseWaitTimeout", "conntrack.tcpBeLiberal",
	"conntrack.udpTimeout", "conntrack.udpStreamTimeout",
}

// ConntrackTimeouts are the conntrack settings of c svcproxy writes, as kube-proxy.
func ConntrackTimeouts(c *kubeproxyconfig.KubeProxyConfiguration) conntrack.Timeouts {
	t := conntrack.Timeouts{TCPBeLiberal: c.Conntrack.TCPBeLiberal, UDP: c.Conntrack.UDPTimeout.Duration, UDPStream: c.Conntrack.UDPStreamTimeout.Duration}
	if c.Conntrack.TCPEstablishedTimeout != nil {
		t.TCPEstablished = c.Conntrack.TCPEstablishedTimeout.Duration
	}
	if c.Conntrack.TCPCloseWaitTimeout != nil {
		t.TCPCloseWait = c.Conntrack.TCPCloseWaitTimeout.Duration
	}
	return t
}

// inertFields are the KubeProxyConfiguration fields svcproxy does not apply (or not
// with every value).
var inertFields = []inertField{
	{path: "mode", why: "svcproxy always programs nftables", value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.Mode },
		asks: func(c *kubeproxyconfig.KubeProxyConfiguration) bool { return c.Mode == ModeIPVS }},
	{path: "showHiddenMetricsForVersion", why: "svcproxy hides no metrics", value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.ShowHiddenMetricsForVersion }},
	{path: "iptables.masqueradeBit", why: whyNoMarks, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return *c.IPTables.MasqueradeBit }},
	{path: "iptables.localhostNodePorts", why: "kube-proxy's nftables mode never serves NodePorts on 127.0.0.1", value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return *c.IPTables.LocalhostNodePorts },
		inMode: only(ModeNFTables)},
	{path: "iptables.masqueradeAll", why: whyOtherMode, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.IPTables.MasqueradeAll },
		inMode: only(ModeNFTables)},
	{path: "iptables.syncPeriod", why: whyOtherMode, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.IPTables.SyncPeriod },
		inMode: only(ModeNFTables, ModeIPVS)},
	{path: "iptables.minSyncPeriod", why: whyOtherMode, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.IPTables.MinSyncPeriod },
		inMode: only(ModeNFTables, ModeIPVS)},
	{path: "nftables.masqueradeBit", why: whyNoMarks, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return *c.NFTables.MasqueradeBit }},
	{path: "nftables.masqueradeAll", why: whyOtherMode, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.NFTables.MasqueradeAll },
		inMode: only("", ModeIPTables, ModeIPVS)},
	{path: "nftables.syncPeriod", why: whyOtherMode, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.NFTables.SyncPeriod },
		inMode: only("", ModeIPTables, ModeIPVS)},
	{path: "nftables.minSyncPeriod", why: whyOtherMode, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.NFTables.MinSyncPeriod },
		inMode: only("", ModeIPTables, ModeIPVS)},
	{path: "ipvs.syncPeriod", why: whyOtherMode, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.IPVS.SyncPeriod },
		inMode: only("", ModeIPTables, ModeNFTables)},
	{path: "ipvs.minSyncPeriod", why: whyOtherMode, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.IPVS.MinSyncPeriod },
		inMode: only("", ModeIPTables, ModeNFTables)},
	{path: "ipvs.scheduler", why: whyIPVS, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.IPVS.Scheduler }},
	{path: "ipvs.excludeCIDRs", why: whyIPVS, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.IPVS.ExcludeCIDRs },
		asks: func(c *kubeproxyconfig.KubeProxyConfiguration) bool { return len(c.IPVS.ExcludeCIDRs) > 0 }},
	{path: "ipvs.strictARP", why: whyIPVS, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.IPVS.StrictARP }},
	{path: "ipvs.tcpTimeout", why: whyIPVS, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.IPVS.TCPTimeout }},
	{path: "ipvs.tcpFinTimeout", why: whyIPVS, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.IPVS.TCPFinTimeout }},
	{path: "ipvs.udpTimeout", why: whyIPVS, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.IPVS.UDPTimeout }},
	{path: "winkernel.networkName", why: whyWindows, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.Winkernel.NetworkName }},
	{path: "winkernel.sourceVip", why: whyWindows, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.Winkernel.SourceVip }},
	{path: "winkernel.enableDSR", why: whyWindows, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.Winkernel.EnableDSR }},
	{path: "winkernel.rootHnsEndpointName", why: whyWindows, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.Winkernel.RootHnsEndpointName }},
	{path: "winkernel.forwardHealthCheckVip", why: whyWindows, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.Winkernel.ForwardHealthCheckVip }},
	{path: "windowsRunAsService", why: whyWindows, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.WindowsRunAsService }},
	{path: "detectLocalMode", why: "svcproxy tells local traffic by clusterCIDR only", value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.DetectLocalMode },
		asks: func(c *kubeproxyconfig.KubeProxyConfiguration) bool {
			return c.DetectLocalMode != "" && c.DetectLocalMode != "ClusterCIDR"
		}},
	{path: "detectLocal.bridgeInterface", why: "svcproxy tells local traffic by clusterCIDR only", value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.DetectLocal.BridgeInterface }},
	{path: "detectLocal.interfaceNamePrefix", why: "svcproxy tells local traffic by clusterCIDR only", value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.DetectLocal.InterfaceNamePrefix }},
	{path: "portRange", why: "kube-proxy ignores it too (userspace mode is gone)", value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return c.PortRange }},
	// Conntrack: 0 means "leave the kernel's value", which is what svcproxy does with
	// nf_conntrack_max; a value would make kube-proxy write it. kube-proxy's non-zero
	// defaults are not warned about (documented instead), or every start would warn.
	{path: "conntrack.maxPerCore", why: whyConntrack, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return *c.Conntrack.MaxPerCore },
		asks: func(c *kubeproxyconfig.KubeProxyConfiguration) bool {
			return *c.Conntrack.MaxPerCore > 0 && *c.Conntrack.MaxPerCore != 32*1024
		}},
	{path: "conntrack.min", why: whyConntrack, value: func(c *kubeproxyconfig.KubeProxyConfiguration) any { return *c.Conntrack.Min },
		asks: func(c *kubeproxyconfig.KubeProxyConfiguration) bool {
			return *c.Conntrack.MaxPerCore > 0 && *c.Conntrack.Min != 128*1024
		}},
}

func only(modes ...kubeproxyconfig.ProxyMode) func(kubeproxyconfig.ProxyMode) bool {
	return func(m kubeproxyconfig.ProxyMode) bool {
		for _, x := range modes {
			if m == x {
				return true
			}
		}
		return false
	}
}

// notApplicable returns one warning per field of c that asks for something svcproxy
// does not do.
func notApplicable(c *kubeproxyconfig.KubeProxyConfiguration) []Warning {
	def := Default()
	var out []Warning
	for _, f := range inertFields {
		if f.inMode != nil && !f.inMode(c.Mode) {
			continue
		}
		asks := f.asks != nil && f.asks(c) || f.asks == nil && !reflect.DeepEqual(f.value(c), f.value(def))
		if asks {
			out = append(out, Warning{Msg: "Configuration field has no effect in svcproxy", KV: []any{"field", f.path, "value", f.value(c), "reason", f.why}})
		}
	}
	return out
}

// featureGates returns the gates svcproxy acts on (component-base's logging gates)
// set from the configuration, and the names of the other gates, sorted. kube-proxy
// refuses gates it does not know; svcproxy cannot know kube-proxy's list, so a
// kube-proxy gate is only warned about.
func featureGates(m map[string]bool) (featuregate.FeatureGate, []string, error) {
	gates := featuregate.NewVersionedFeatureGate(version.MustParse("1.37"))
	if err := logsapi.AddFeatureGates(gates); err != nil {
		panic(err) // static registration, cannot fail
	}
	known, unknown := map[string]bool{}, []string(nil)
	for name, v := range m {
		if _, ok := gates.GetAll()[featuregate.Feature(name)]; ok {
			known[name] = v
		} else {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	return gates, unknown, gates.SetFromMap(known)
}
