package main

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
	componentbaseconfig "k8s.io/component-base/config/v1alpha1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/svcproxy/svcproxy/pkg/safefile"
)

// kube-proxy's well-known ports (k8s.io/kubernetes/pkg/cluster/ports).
const (
	proxyHealthzPort = 10256
	proxyStatusPort  = 10249
)

// Proxy modes kube-proxy knows on Linux; svcproxy always programs nftables.
const (
	modeIPTables = "iptables"
	modeNFTables = "nftables"
	modeIPVS     = "ipvs"
)

// maxConfigBytes caps what --config reads: a KubeProxyConfiguration is a few
// kilobytes.
const maxConfigBytes = 1 << 20

// loadConfigFile reads a KubeProxyConfiguration file and returns it with kube-proxy's
// defaults applied, plus a warning when the file only decodes leniently. Only a
// regular file (or a link to one) of at most maxConfigBytes is read: a named pipe,
// a device or a bigger file is refused at once, saying why.
func loadConfigFile(path string) (*kubeproxyconfig.KubeProxyConfiguration, []warning, error) {
	data, err := safefile.Read(path, maxConfigBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("--config: %w", err)
	}
	cfg, warnings, err := decodeConfig(data)
	if err != nil {
		return nil, nil, fmt.Errorf("--config %s: %w", path, err)
	}
	return cfg, warnings, nil
}

// decodeConfig decodes as kube-proxy v1.37 does: strictly first; a strict-decoding
// error alone (an unknown or duplicated field) is only a warning for v1alpha1, and the
// file is then decoded leniently. Anything else (bad YAML, wrong kind or version,
// a value of the wrong type) is an error.
func decodeConfig(data []byte) (*kubeproxyconfig.KubeProxyConfiguration, []warning, error) {
	var warnings []warning
	obj, gvk, err := configCodecs(serializer.EnableStrict).UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		if !runtime.IsStrictDecodingError(err) {
			return nil, nil, fmt.Errorf("failed to decode: %w", err)
		}
		var lenientErr error
		obj, gvk, lenientErr = configCodecs(serializer.DisableStrict).UniversalDeserializer().Decode(data, nil, nil)
		if lenientErr != nil {
			return nil, nil, fmt.Errorf("failed lenient decoding: %w", err)
		}
		warnings = append(warnings, warning{msg: "Using lenient decoding as strict decoding failed", kv: []any{"err", err.Error()}})
	}
	cfg, ok := obj.(*kubeproxyconfig.KubeProxyConfiguration)
	if !ok {
		return nil, nil, fmt.Errorf("got unexpected config type: %v", gvk)
	}
	setDefaults(cfg)
	return cfg, warnings, nil
}

// configCodecs knows only kubeproxy.config.k8s.io/v1alpha1, the one version kube-proxy
// reads; without an internal version the file decodes into the versioned type itself.
func configCodecs(strict serializer.CodecFactoryOptionsMutator) serializer.CodecFactory {
	scheme := runtime.NewScheme()
	if err := kubeproxyconfig.AddToScheme(scheme); err != nil {
		panic(fmt.Sprintf("kube-proxy config scheme: %v", err)) // static registration, cannot fail
	}
	return serializer.NewCodecFactory(scheme, strict)
}

// defaultConfig is what kube-proxy runs with when given no file and no flags.
func defaultConfig() *kubeproxyconfig.KubeProxyConfiguration {
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
	c.HealthzBindAddress = addressOrDefault(c.HealthzBindAddress, healthzHost, proxyHealthzPort)
	c.MetricsBindAddress = addressOrDefault(c.MetricsBindAddress, metricsHost, proxyStatusPort)
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

// addressOrDefault is kube-proxy's rule for the server addresses: empty means
// host:port, a bare IP gets the port, anything else is left for validation.
func addressOrDefault(addr, host string, port int) string {
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

// modeSection returns the sync periods and masquerade setting that apply in cfg's
// mode, as kube-proxy's conversion picks them: nftables reads `nftables`, ipvs reads
// `ipvs` (masquerading from `iptables`), and "" or iptables read `iptables`.
func modeSection(cfg *kubeproxyconfig.KubeProxyConfiguration) (sync, minSync *metav1.Duration, masqueradeAll *bool, prefix string) {
	switch cfg.Mode {
	case modeNFTables:
		return &cfg.NFTables.SyncPeriod, &cfg.NFTables.MinSyncPeriod, &cfg.NFTables.MasqueradeAll, "nftables"
	case modeIPVS:
		return &cfg.IPVS.SyncPeriod, &cfg.IPVS.MinSyncPeriod, &cfg.IPTables.MasqueradeAll, "ipvs"
	default:
		return &cfg.IPTables.SyncPeriod, &cfg.IPTables.MinSyncPeriod, &cfg.IPTables.MasqueradeAll, "iptables"
	}
}

// warning is a message logged once, after logging is configured.
type warning struct {
	msg string
	kv  []any
}

// applyClientConnection sets clientConnection's settings on a client config, as
// kube-proxy's createClient does.
func applyClientConnection(cfg *rest.Config, cc componentbaseconfig.ClientConnectionConfiguration) {
	cfg.AcceptContentTypes = cc.AcceptContentTypes
	cfg.ContentType = cc.ContentType
	cfg.QPS = cc.QPS
	cfg.Burst = int(cc.Burst)
}
