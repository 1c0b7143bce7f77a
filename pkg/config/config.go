// Package config is svcproxy's KubeProxyConfiguration: the --config file loaded
// and defaulted as kube-proxy v1.37 does, validated with kube-proxy's rules, the
// catalogue of fields svcproxy applies or only warns about, what each proxy mode
// reads (sync periods, NodePort addresses), the checks that need the node's IP
// families, and the watch that ends the process when the file changes. Flags are
// cmd/svcproxy's: they fill the same KubeProxyConfiguration.
package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/svcproxy/svcproxy/pkg/nodeaddr"
	"github.com/svcproxy/svcproxy/pkg/safefile"
)

// kube-proxy's well-known ports (k8s.io/kubernetes/pkg/cluster/ports): the health
// check server's and the metrics (status) server's.
const (
	HealthzPort = 10256
	StatusPort  = 10249
)

// Proxy modes kube-proxy knows on Linux; svcproxy always programs nftables.
const (
	ModeIPTables = "iptables"
	ModeNFTables = "nftables"
	ModeIPVS     = "ipvs"
)

// maxBytes caps what Load reads: a KubeProxyConfiguration is a few
// kilobytes.
const maxBytes = 1 << 20

// File is a --config file decoded, with kube-proxy's defaults applied.
type File struct {
	Config *kubeproxyconfig.KubeProxyConfiguration
	// Warnings: the file only decoded leniently.
	Warnings []Warning
	// MinSyncPeriodSet: the file gives its mode's minSyncPeriod (not 0s, which is
	// what kubeadm writes for "unset"). svcproxy then waits that long between syncs
	// under a burst, as kube-proxy does; otherwise it spaces syncs by their cost,
	// the defaulted value being the ceiling (agent.Options.MinSyncPeriodSet).
	MinSyncPeriodSet bool
	// Stamp is the file's content stamp taken before it was read, for WatchFile.
	Stamp string
}

// Load reads the --config file, a KubeProxyConfiguration, and returns it with
// kube-proxy's defaults applied, plus a warning when the file only decodes
// leniently. Errors name the flag and the file, as kube-proxy's do. Only a
// regular file (or a link to one) of at most maxBytes is read: a named pipe,
// a device or a bigger file is refused at once, saying why.
func Load(path string) (*File, error) {
	stamp := stampOf(path)
	data, err := safefile.Read(path, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	f, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	f.Stamp = stamp
	return f, nil
}

// decode decodes as kube-proxy v1.37 does: strictly first; a strict-decoding
// error alone (an unknown or duplicated field) is only a warning for v1alpha1, and the
// file is then decoded leniently. Anything else (bad YAML, wrong kind or version,
// a value of the wrong type) is an error.
func decode(data []byte) (*File, error) {
	var warnings []Warning
	obj, gvk, err := codecs(serializer.EnableStrict).UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		if !runtime.IsStrictDecodingError(err) {
			return nil, fmt.Errorf("failed to decode: %w", err)
		}
		var lenientErr error
		obj, gvk, lenientErr = codecs(serializer.DisableStrict).UniversalDeserializer().Decode(data, nil, nil)
		if lenientErr != nil {
			return nil, fmt.Errorf("failed lenient decoding: %w", err)
		}
		warnings = append(warnings, Warning{Msg: "Using lenient decoding as strict decoding failed", KV: []any{"err", err.Error()}})
	}
	cfg, ok := obj.(*kubeproxyconfig.KubeProxyConfiguration)
	if !ok {
		return nil, fmt.Errorf("got unexpected config type: %v", gvk)
	}
	_, minSync, _, _ := ModeSection(cfg)
	set := minSync.Duration != 0
	setDefaults(cfg)
	return &File{Config: cfg, Warnings: warnings, MinSyncPeriodSet: set}, nil
}

// codecs knows only kubeproxy.config.k8s.io/v1alpha1, the one version kube-proxy
// reads; without an internal version the file decodes into the versioned type itself.
func codecs(strict serializer.CodecFactoryOptionsMutator) serializer.CodecFactory {
	scheme := runtime.NewScheme()
	if err := kubeproxyconfig.AddToScheme(scheme); err != nil {
		panic(fmt.Sprintf("kube-proxy config scheme: %v", err)) // static registration, cannot fail
	}
	return serializer.NewCodecFactory(scheme, strict)
}

// Default is what kube-proxy runs with when given no file and no flags: the
// configuration the flags start from.
func Default() *kubeproxyconfig.KubeProxyConfiguration {
	cfg := &kubeproxyconfig.KubeProxyConfiguration{}
	setDefaults(cfg)
	return cfg
}

// setDefaults fills unset fields with kube-proxy v1.37's defaults (its
// pkg/proxy/apis/config/v1alpha1 defaulting), so that a file means what it means to
// kube-proxy and /configz shows the same values.
func setDefaults(c *kubeproxyconfig.KubeProxyConfiguration) {
	c.APIVersion, c.Kind = kubeproxyconfig.SchemeGroupVersion.String(), "KubeProxyConfiguration"
	if c.BindAddress == "" {
		c.BindAddress = "0.0.0.0"
	}
	healthzHost, metricsHost := "0.0.0.0", "127.0.0.1"
	if ip, err := netip.ParseAddr(c.BindAddress); err == nil && !ip.Unmap().Is4() {
		healthzHost, metricsHost = "[::]", "[::1]"
	}
	c.HealthzBindAddress = AddressOrDefault(c.HealthzBindAddress, healthzHost, HealthzPort)
	c.MetricsBindAddress = AddressOrDefault(c.MetricsBindAddress, metricsHost, StatusPort)
	if c.OOMScoreAdj == nil {
		c.OOMScoreAdj = ptr.To[int32](-999)
	}
	defaultDuration(&c.IPTables.SyncPeriod, 30*time.Second)
	defaultDuration(&c.IPTables.MinSyncPeriod, time.Second)
	if c.IPTables.LocalhostNodePorts == nil {
		c.IPTables.LocalhostNodePorts = ptr.To(true)
	}
	if c.IPTables.MasqueradeBit == nil {
		c.IPTables.MasqueradeBit = ptr.To[int32](14)
	}
	defaultDuration(&c.IPVS.SyncPeriod, 30*time.Second)
	defaultDuration(&c.NFTables.SyncPeriod, 30*time.Second)
	defaultDuration(&c.NFTables.MinSyncPeriod, time.Second)
	if c.NFTables.MasqueradeBit == nil {
		c.NFTables.MasqueradeBit = ptr.To[int32](14)
	}
	if c.Conntrack.MaxPerCore == nil {
		c.Conntrack.MaxPerCore = ptr.To[int32](32 * 1024)
	}
	if c.Conntrack.Min == nil {
		c.Conntrack.Min = ptr.To[int32](128 * 1024)
	}
	if c.Conntrack.TCPEstablishedTimeout == nil {
		c.Conntrack.TCPEstablishedTimeout = &metav1.Duration{Duration: 24 * time.Hour}
	}
	if c.Conntrack.TCPCloseWaitTimeout == nil {
		c.Conntrack.TCPCloseWaitTimeout = &metav1.Duration{Duration: time.Hour}
	}
	defaultDuration(&c.ConfigSyncPeriod, 15*time.Minute)
	if c.ClientConnection.ContentType == "" {
		c.ClientConnection.ContentType = "application/vnd.kubernetes.protobuf"
	}
	if c.ClientConnection.QPS == 0 {
		c.ClientConnection.QPS = 5
	}
	if c.ClientConnection.Burst == 0 {
		c.ClientConnection.Burst = 10
	}
	if c.FeatureGates == nil {
		c.FeatureGates = map[string]bool{}
	}
	logsapi.SetRecommendedLoggingConfiguration(&c.Logging)
}

func defaultDuration(d *metav1.Duration, def time.Duration) {
	if d.Duration == 0 {
		d.Duration = def
	}
}

// AddressOrDefault is kube-proxy's rule for the server addresses: empty means
// host:port, a bare IP gets the port, anything else is left for validation.
func AddressOrDefault(addr, host string, port int) string {
	if addr == "" {
		return host + ":" + strconv.Itoa(port)
	}
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	if ip, err := netip.ParseAddr(addr); err == nil {
		return net.JoinHostPort(ip.String(), strconv.Itoa(port))
	}
	return addr
}

// ModeSection returns the sync periods and masquerade setting that apply in cfg's
// mode, as kube-proxy's conversion picks them: nftables reads `nftables`, ipvs reads
// `ipvs` (masquerading from `iptables`), and "" or iptables read `iptables`.
func ModeSection(cfg *kubeproxyconfig.KubeProxyConfiguration) (sync, minSync *metav1.Duration, masqueradeAll *bool, prefix string) {
	switch cfg.Mode {
	case ModeNFTables:
		return &cfg.NFTables.SyncPeriod, &cfg.NFTables.MinSyncPeriod, &cfg.NFTables.MasqueradeAll, "nftables"
	case ModeIPVS:
		return &cfg.IPVS.SyncPeriod, &cfg.IPVS.MinSyncPeriod, &cfg.IPTables.MasqueradeAll, "ipvs"
	default:
		return &cfg.IPTables.SyncPeriod, &cfg.IPTables.MinSyncPeriod, &cfg.IPTables.MasqueradeAll, "iptables"
	}
}

// NodePorts applies kube-proxy's per-mode defaults: with no
// nodePortAddresses, iptables (and blank, and ipvs) mode serve NodePorts on every
// local address, nftables mode on the primary IPs only; localhost NodePorts are
// an iptables-mode setting that nftables mode never honours.
func NodePorts(cfg *kubeproxyconfig.KubeProxyConfiguration) (nodeaddr.Spec, bool, error) {
	localhost := cfg.IPTables.LocalhostNodePorts == nil || *cfg.IPTables.LocalhostNodePorts
	if cfg.Mode == ModeNFTables {
		localhost = false
	}
	spec, err := nodeaddr.Parse(NodePortEntries(cfg))
	return spec, localhost, err
}

// NodePortEntries is nodePortAddresses with the mode's default applied.
func NodePortEntries(cfg *kubeproxyconfig.KubeProxyConfiguration) []string {
	if cfg.Mode == ModeNFTables && len(cfg.NodePortAddresses) == 0 {
		return []string{nodeaddr.KeywordPrimary}
	}
	return cfg.NodePortAddresses
}

// Warning is a message for the log, with its key/value pairs: loading and checking
// happen before logging is configured, so the caller logs these once it is.
type Warning struct {
	Msg string
	KV  []any
}
