package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/metrics"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
)

// Check is what a configuration goes through before svcproxy runs with it,
// whether it came from the file or the flags: its feature gates are set, it is
// validated as kube-proxy validates it, and what svcproxy does not act on is
// returned as warnings (gates it does not know, then fields it does not apply).
// The gates are those svcproxy knows, the logging ones.
func Check(c *kubeproxyconfig.KubeProxyConfiguration) (featuregate.FeatureGate, []Warning, error) {
	gates, unknownGates, err := featureGates(c.FeatureGates)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid configuration: featureGates: %w", err)
	}
	if errs := validate(c, gates); len(errs) > 0 {
		return nil, nil, fmt.Errorf("invalid configuration: %w", errs.ToAggregate())
	}
	var warnings []Warning
	for _, g := range unknownGates {
		warnings = append(warnings, Warning{Msg: "Feature gate has no effect in svcproxy", KV: []any{"field", "featureGates." + g, "value", c.FeatureGates[g]}})
	}
	return gates, append(warnings, notApplicable(c)...), nil
}

// validate checks the effective configuration as kube-proxy v1.37 validates it
// (pkg/proxy/apis/config/validation), so that a configuration kube-proxy refuses is
// refused here too. Errors name the field by its path in the file
// (`nftables.syncPeriod: Invalid value: "-1s": ...`), which is also what the flags
// set.
func validate(c *kubeproxyconfig.KubeProxyConfiguration, gates featuregate.FeatureGate) field.ErrorList {
	var errs field.ErrorList
	root := (*field.Path)(nil)

	errs = append(errs, validateMasqueradeBit(c.IPTables.MasqueradeBit, root.Child("iptables", "masqueradeBit"))...)
	switch c.Mode {
	case ModeIPVS:
		p := root.Child("ipvs")
		errs = append(errs, nonNegative(c.IPVS.TCPTimeout, p.Child("tcpTimeout"))...)
		errs = append(errs, nonNegative(c.IPVS.TCPFinTimeout, p.Child("tcpFinTimeout"))...)
		errs = append(errs, nonNegative(c.IPVS.UDPTimeout, p.Child("udpTimeout"))...)
		for i, cidr := range c.IPVS.ExcludeCIDRs {
			if _, err := netip.ParsePrefix(cidr); err != nil {
				errs = append(errs, field.Invalid(p.Child("excludeCIDRs").Index(i), cidr, "must be a valid CIDR"))
			}
		}
	case ModeNFTables:
		errs = append(errs, validateMasqueradeBit(c.NFTables.MasqueradeBit, root.Child("nftables", "masqueradeBit"))...)
	}
	errs = append(errs, validateConntrack(&c.Conntrack, root.Child("conntrack"))...)
	if c.OOMScoreAdj != nil && (*c.OOMScoreAdj < -1000 || *c.OOMScoreAdj > 1000) {
		errs = append(errs, field.Invalid(root.Child("oomScoreAdj"), *c.OOMScoreAdj, "must be within the range [-1000, 1000]"))
	}
	switch c.Mode {
	case "", ModeIPTables, ModeNFTables, ModeIPVS:
	default:
		errs = append(errs, field.Invalid(root.Child("mode"), string(c.Mode), "must be ipvs, iptables, nftables or blank (blank means the best-available proxy [currently iptables])"))
	}
	if c.ClientConnection.Burst < 0 {
		errs = append(errs, field.Invalid(root.Child("clientConnection", "burst"), c.ClientConnection.Burst, "must be greater than or equal to 0"))
	}
	if c.ConfigSyncPeriod.Duration <= 0 {
		errs = append(errs, field.Invalid(root.Child("configSyncPeriod"), c.ConfigSyncPeriod, "must be greater than 0"))
	}
	sync, minSync, _, section := ModeSection(c)
	syncPath, minSyncPath := root.Child(section, "syncPeriod"), root.Child(section, "minSyncPeriod")
	if sync.Duration <= 0 {
		errs = append(errs, field.Invalid(syncPath, *sync, "must be greater than 0"))
	}
	if minSync.Duration < 0 {
		errs = append(errs, field.Invalid(minSyncPath, *minSync, "must be greater than or equal to 0"))
	}
	if minSync.Duration > sync.Duration {
		errs = append(errs, field.Invalid(syncPath, *minSync, fmt.Sprintf("must be greater than or equal to %s", minSyncPath)))
	}
	if _, err := netip.ParseAddr(strings.Trim(c.BindAddress, "[]")); err != nil {
		errs = append(errs, field.Invalid(root.Child("bindAddress"), c.BindAddress, "not a valid textual representation of an IP address"))
	}
	if c.HealthzBindAddress != "" {
		errs = append(errs, validateHostPort(c.HealthzBindAddress, root.Child("healthzBindAddress"))...)
	}
	if c.MetricsBindAddress != "" { // svcproxy: an empty --metrics-bind-address disables the server
		errs = append(errs, validateHostPort(c.MetricsBindAddress, root.Child("metricsBindAddress"))...)
	}
	errs = append(errs, validateNodePortAddresses(c.NodePortAddresses, root.Child("nodePortAddresses"))...)
	for _, err := range metrics.ValidateShowHiddenMetricsVersion(c.ShowHiddenMetricsForVersion) {
		errs = append(errs, field.Invalid(root.Child("showHiddenMetricsForVersion"), c.ShowHiddenMetricsForVersion, err.Error()))
	}
	errs = append(errs, validateDetectLocal(c, root)...)
	errs = append(errs, logsapi.Validate(&c.Logging, gates, root.Child("logging"))...)
	return errs
}

func validateMasqueradeBit(bit *int32, p *field.Path) field.ErrorList {
	if bit != nil && (*bit < 0 || *bit > 31) {
		return field.ErrorList{field.Invalid(p, *bit, "must be within the range [0, 31]")}
	}
	return nil
}

func validateConntrack(c *kubeproxyconfig.KubeProxyConntrackConfiguration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.MaxPerCore != nil && *c.MaxPerCore < 0 {
		errs = append(errs, field.Invalid(p.Child("maxPerCore"), *c.MaxPerCore, "must be greater than or equal to 0"))
	}
	if c.Min != nil && *c.Min < 0 {
		errs = append(errs, field.Invalid(p.Child("min"), *c.Min, "must be greater than or equal to 0"))
	}
	if c.TCPEstablishedTimeout != nil {
		errs = append(errs, nonNegative(*c.TCPEstablishedTimeout, p.Child("tcpEstablishedTimeout"))...)
	}
	if c.TCPCloseWaitTimeout != nil {
		errs = append(errs, nonNegative(*c.TCPCloseWaitTimeout, p.Child("tcpCloseWaitTimeout"))...)
	}
	errs = append(errs, nonNegative(c.UDPTimeout, p.Child("udpTimeout"))...)
	errs = append(errs, nonNegative(c.UDPStreamTimeout, p.Child("udpStreamTimeout"))...)
	return errs
}

func nonNegative(d metav1.Duration, p *field.Path) field.ErrorList {
	if d.Duration < 0 {
		return field.ErrorList{field.Invalid(p, d, "must be greater than or equal to 0")}
	}
	return nil
}

func validateHostPort(input string, p *field.Path) field.ErrorList {
	host, port, err := net.SplitHostPort(input)
	if err != nil {
		return field.ErrorList{field.Invalid(p, input, "must be IP:port")}
	}
	var errs field.ErrorList
	if _, err := netip.ParseAddr(host); err != nil {
		errs = append(errs, field.Invalid(p, host, "must be a valid IP"))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		errs = append(errs, field.Invalid(p, port, "must be a valid port"))
	}
	return errs
}

func validateNodePortAddresses(addrs []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, a := range addrs {
		switch a {
		case "primary", "localhost", "all":
			if seen[a] {
				errs = append(errs, field.Duplicate(p.Index(i), a))
			}
			seen[a] = true
			continue
		}
		if _, err := netip.ParsePrefix(a); err != nil {
			errs = append(errs, field.Invalid(p.Index(i), a, "must be a valid CIDR or one of the keywords 'primary', 'localhost', 'all'"))
		}
	}
	return errs
}

// validateDetectLocal checks detectLocalMode and what it needs; kube-proxy treats an
// empty mode as ClusterCIDR, so clusterCIDR is always checked.
func validateDetectLocal(c *kubeproxyconfig.KubeProxyConfiguration, root *field.Path) field.ErrorList {
	modes := []string{"ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix", ""}
	var errs field.ErrorList
	switch c.DetectLocalMode {
	case "", "ClusterCIDR", "NodeCIDR":
	case "BridgeInterface":
		if c.DetectLocal.BridgeInterface == "" {
			errs = append(errs, field.Invalid(root.Child("detectLocal", "bridgeInterface"), "", "must not be empty"))
		}
	case "InterfaceNamePrefix":
		if c.DetectLocal.InterfaceNamePrefix == "" {
			errs = append(errs, field.Invalid(root.Child("detectLocal", "interfaceNamePrefix"), "", "must not be empty"))
		}
	default:
		errs = append(errs, field.NotSupported(root.Child("detectLocalMode"), string(c.DetectLocalMode), modes))
	}
	if c.ClusterCIDR != "" && (c.DetectLocalMode == "" || c.DetectLocalMode == "ClusterCIDR") {
		errs = append(errs, ValidateClusterCIDRs(c.ClusterCIDR, root.Child("clusterCIDR"))...)
	}
	return errs
}

// ValidateClusterCIDRs accepts one CIDR or a dual-stack pair, like kube-proxy;
// errors name the CIDRs by p (a field's path, or a flag).
func ValidateClusterCIDRs(s string, p *field.Path) field.ErrorList {
	parts := strings.Split(s, ",")
	if len(parts) > 2 {
		return field.ErrorList{field.Invalid(p, s, "must be a either a single CIDR or dual-stack pair of CIDRs (e.g. [10.100.0.0/16, fde4:8dba:82e1::/48]")}
	}
	var errs field.ErrorList
	var families []bool
	for i, c := range parts {
		prefix, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			errs = append(errs, field.Invalid(p.Index(i), c, "must be a valid CIDR block (e.g. 10.100.0.0/16 or fde4:8dba:82e1::/48)"))
			continue
		}
		families = append(families, prefix.Addr().Is4())
	}
	if len(errs) == 0 && len(families) == 2 && families[0] == families[1] {
		errs = append(errs, field.Invalid(p, s, "must be a either a single CIDR or dual-stack pair of CIDRs (e.g. [10.100.0.0/16, fde4:8dba:82e1::/48]"))
	}
	return errs
}
