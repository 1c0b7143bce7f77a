package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // the json format, as cmd/svcproxy registers it
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

const configHeader = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"

// TestConfigFile reads files field by field: what each sets (with kube-proxy's
// defaults), and which values are refused, naming the field.
func TestConfigFile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string
		check   func(l loaded) []check
		wantErr string
	}{
		{
			name: "empty file: kube-proxy's defaults, iptables section",
			check: func(l loaded) []check {
				return []check{
					{"syncPeriod", l.sync(), 30 * time.Second},
					{"minSyncPeriod", l.minSync(), time.Second},
					{"minSyncPeriodSet", l.minSyncSet, false},
					{"metricsAddr", l.cfg.MetricsBindAddress, "127.0.0.1:10249"},
					{"healthzAddr", l.cfg.HealthzBindAddress, "0.0.0.0:10256"},
					{"contentType", l.cfg.ClientConnection.ContentType, "application/vnd.kubernetes.protobuf"},
					{"qps", l.cfg.ClientConnection.QPS, float32(5)},
					{"burst", l.cfg.ClientConnection.Burst, int32(10)},
					{"configSyncPeriod", l.cfg.ConfigSyncPeriod.Duration, 15 * time.Minute},
					{"oomScoreAdj", *l.cfg.OOMScoreAdj, int32(-999)},
					{"logging.format", l.cfg.Logging.Format, "text"},
					{"kubeconfig", l.cfg.ClientConnection.Kubeconfig, ""},
				}
			},
		},
		{
			name: "nftables mode reads the nftables section",
			body: "mode: nftables\nnftables: {syncPeriod: 20s, minSyncPeriod: 2s, masqueradeAll: true}\niptables: {masqueradeAll: false}\n",
			check: func(l loaded) []check {
				return []check{
					{"syncPeriod", l.sync(), 20 * time.Second},
					{"minSyncPeriod", l.minSync(), 2 * time.Second},
					{"minSyncPeriodSet", l.minSyncSet, true},
					{"masqueradeAll", l.masqueradeAll(), true},
				}
			},
		},
		{
			name: "iptables mode reads the iptables section, not nftables'",
			body: "mode: iptables\niptables: {syncPeriod: 40s, minSyncPeriod: 3s, masqueradeAll: true}\nnftables: {syncPeriod: 20s}\n",
			check: func(l loaded) []check {
				return []check{
					{"syncPeriod", l.sync(), 40 * time.Second},
					{"minSyncPeriod", l.minSync(), 3 * time.Second},
					{"minSyncPeriodSet", l.minSyncSet, true},
					{"masqueradeAll", l.masqueradeAll(), true},
				}
			},
		},
		{
			name: "ipvs mode reads ipvs' periods and iptables' masqueradeAll",
			body: "mode: ipvs\nipvs: {syncPeriod: 50s, minSyncPeriod: 5s}\niptables: {masqueradeAll: true}\n",
			check: func(l loaded) []check {
				return []check{
					{"syncPeriod", l.sync(), 50 * time.Second},
					{"minSyncPeriod", l.minSync(), 5 * time.Second},
					{"minSyncPeriodSet", l.minSyncSet, true},
					{"masqueradeAll", l.masqueradeAll(), true},
				}
			},
		},
		{
			// kubeadm writes every section with minSyncPeriod: 0s: unset, kube-proxy's
			// default, and svcproxy spaces syncs by their cost.
			name: "kubeadm's 0s is unset",
			body: "mode: nftables\nnftables: {syncPeriod: 0s, minSyncPeriod: 0s}\niptables: {minSyncPeriod: 5s}\n",
			check: func(l loaded) []check {
				return []check{
					{"minSyncPeriod", l.minSync(), time.Second},
					{"minSyncPeriodSet", l.minSyncSet, false},
				}
			},
		},
		{
			name: "client connection, node, addresses, CIDR",
			body: `clientConnection:
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
  contentType: application/json
  acceptContentTypes: application/json
  qps: 50
  burst: 100
hostnameOverride: Node-A
clusterCIDR: 10.244.0.0/16,fd00::/48
healthzBindAddress: 10.0.0.1
metricsBindAddress: 0.0.0.0:10249
configSyncPeriod: 5m
oomScoreAdj: -500
enableProfiling: true
`,
			check: func(l loaded) []check {
				return []check{
					{"kubeconfig", l.cfg.ClientConnection.Kubeconfig, "/var/lib/kube-proxy/kubeconfig.conf"},
					{"contentType", l.cfg.ClientConnection.ContentType, "application/json"},
					{"acceptContentTypes", l.cfg.ClientConnection.AcceptContentTypes, "application/json"},
					{"qps", l.cfg.ClientConnection.QPS, float32(50)},
					{"burst", l.cfg.ClientConnection.Burst, int32(100)},
					{"hostnameOverride", l.cfg.HostnameOverride, "Node-A"}, // lowercased where the node name is made
					{"clusterCIDR", ClusterCIDRFor(l.cfg.ClusterCIDR, endpoints.IPv4).String(), "10.244.0.0/16"},
					{"healthzAddr", l.cfg.HealthzBindAddress, "10.0.0.1:10256"},
					{"metricsAddr", l.cfg.MetricsBindAddress, "0.0.0.0:10249"},
					{"configSyncPeriod", l.cfg.ConfigSyncPeriod.Duration, 5 * time.Minute},
					{"oomScoreAdj", *l.cfg.OOMScoreAdj, int32(-500)},
					{"enableProfiling", l.cfg.EnableProfiling, true},
				}
			},
		},
		{
			name: "IPv6 bindAddress defaults the servers to IPv6",
			body: "bindAddress: \"::\"\n",
			check: func(l loaded) []check {
				return []check{
					{"healthzAddr", l.cfg.HealthzBindAddress, "[::]:10256"},
					{"metricsAddr", l.cfg.MetricsBindAddress, "[::1]:10249"},
				}
			},
		},
		{
			name: "logging section: json, verbosity",
			body: "logging: {format: json, verbosity: 3}\n",
			check: func(l loaded) []check {
				return []check{
					{"logging.format", l.cfg.Logging.Format, "json"},
					{"logging.verbosity", l.cfg.Logging.Verbosity, logsapi.VerbosityLevel(3)},
				}
			},
		},
		{
			name: "logging section: vmodule, split stream with its gate",
			body: "featureGates: {LoggingAlphaOptions: true}\nlogging: {vmodule: [{filePattern: serve, verbosity: 4}], options: {text: {splitStream: true}}}\n",
			check: func(l loaded) []check {
				return []check{
					{"logging.vmodule", fmt.Sprint(l.cfg.Logging.VModule), "[{serve 4}]"},
					{"logging.options.text.splitStream", l.cfg.Logging.Options.Text.SplitStream, true},
				}
			},
		},
		{
			name: "unknown field: a warning, as kube-proxy's lenient v1alpha1 decoding",
			body: "foo: bar\nclusterCIDR: 10.244.0.0/16\n",
			check: func(l loaded) []check {
				return []check{
					{"clusterCIDR", l.cfg.ClusterCIDR, "10.244.0.0/16"},
					{"warning", l.warned(`unknown field "foo"`), true},
				}
			},
		},
		{
			name: "duplicate field: a warning, the last value wins",
			body: "clusterCIDR: 10.1.0.0/16\nclusterCIDR: 10.244.0.0/16\n",
			check: func(l loaded) []check {
				return []check{
					{"clusterCIDR", l.cfg.ClusterCIDR, "10.244.0.0/16"},
					{"warning", l.warned(`key "clusterCIDR" already set`), true},
				}
			},
		},
		{
			name: "unknown feature gate: a warning naming it; logging gates apply",
			body: "featureGates: {KubeProxySomething: true, LoggingAlphaOptions: true}\nlogging: {options: {text: {splitStream: true}}}\n",
			check: func(l loaded) []check {
				return []check{
					{"warning", l.warned("featureGates.KubeProxySomething"), true},
					{"LoggingAlphaOptions", l.gates.Enabled(logsapi.LoggingAlphaOptions), true},
				}
			},
		},
		{name: "negative sync period in its mode", body: "mode: nftables\nnftables: {syncPeriod: -1s}\n", wantErr: `nftables.syncPeriod: Invalid value: "-1s": must be greater than 0`},
		{name: "negative iptables sync period in blank mode", body: "iptables: {syncPeriod: -1s}\n", wantErr: `iptables.syncPeriod: Invalid value: "-1s"`},
		{name: "negative min sync period", body: "mode: nftables\nnftables: {minSyncPeriod: -2s}\n", wantErr: `nftables.minSyncPeriod: Invalid value: "-2s": must be greater than or equal to 0`},
		{name: "min sync period above sync period", body: "mode: nftables\nnftables: {syncPeriod: 5s, minSyncPeriod: 10s}\n", wantErr: `nftables.syncPeriod: Invalid value: "10s": must be greater than or equal to nftables.minSyncPeriod`},
		{name: "unknown mode", body: "mode: userspace\n", wantErr: `mode: Invalid value: "userspace"`},
		{name: "bad port", body: "metricsBindAddress: 127.0.0.1:99999\n", wantErr: `metricsBindAddress: Invalid value: "99999": must be a valid port`},
		{name: "bad healthz host", body: "healthzBindAddress: nohost:10256\n", wantErr: `healthzBindAddress: Invalid value: "nohost": must be a valid IP`},
		{name: "bad bind address", body: "bindAddress: 1.2.3\n", wantErr: `bindAddress: Invalid value: "1.2.3"`},
		{name: "bad cluster CIDR", body: "clusterCIDR: 10.244.0.0/33\n", wantErr: `clusterCIDR[0]: Invalid value: "10.244.0.0/33"`},
		{name: "two IPv4 cluster CIDRs", body: "clusterCIDR: 10.1.0.0/16,10.2.0.0/16\n", wantErr: `clusterCIDR: Invalid value: "10.1.0.0/16,10.2.0.0/16"`},
		{name: "negative burst", body: "clientConnection: {burst: -1}\n", wantErr: `clientConnection.burst: Invalid value: -1`},
		{name: "negative config sync period", body: "configSyncPeriod: -1m\n", wantErr: `configSyncPeriod: Invalid value: "-1m0s": must be greater than 0`},
		{name: "oom score out of range", body: "oomScoreAdj: 2000\n", wantErr: `oomScoreAdj: Invalid value: 2000`},
		{name: "negative conntrack max", body: "conntrack: {maxPerCore: -1}\n", wantErr: `conntrack.maxPerCore: Invalid value: -1`},
		{name: "negative conntrack timeout", body: "conntrack: {udpTimeout: -1s}\n", wantErr: `conntrack.udpTimeout: Invalid value: "-1s"`},
		{name: "masquerade bit out of range", body: "iptables: {masqueradeBit: 32}\n", wantErr: `iptables.masqueradeBit: Invalid value: 32`},
		{name: "nftables masquerade bit, nftables mode", body: "mode: nftables\nnftables: {masqueradeBit: -1}\n", wantErr: `nftables.masqueradeBit: Invalid value: -1`},
		{name: "ipvs timeouts in ipvs mode", body: "mode: ipvs\nipvs: {tcpTimeout: -1s}\n", wantErr: `ipvs.tcpTimeout: Invalid value: "-1s"`},
		{name: "bad detect-local mode", body: "detectLocalMode: Magic\n", wantErr: `detectLocalMode: Unsupported value: "Magic"`},
		{name: "bridge mode without a bridge", body: "detectLocalMode: BridgeInterface\n", wantErr: `detectLocal.bridgeInterface: Invalid value: ""`},
		{name: "bad node port address", body: "nodePortAddresses: [primary, nope]\n", wantErr: `nodePortAddresses[1]: Invalid value: "nope"`},
		{name: "bad hidden metrics version", body: "showHiddenMetricsForVersion: banana\n", wantErr: `showHiddenMetricsForVersion: Invalid value: "banana"`},
		{name: "vmodule with json", body: "logging: {format: json, vmodule: [{filePattern: serve, verbosity: 4}]}\n", wantErr: "logging.vmodule: Forbidden: Only supported for text log format"},
		{name: "unknown log format", body: "logging: {format: xml}\n", wantErr: `logging.format: Invalid value: "xml": Unsupported log format`},
		{name: "alpha logging option without its gate", body: "logging: {options: {text: {splitStream: true}}}\n", wantErr: "logging.options.text.splitStream: Forbidden"},
		{name: "value of the wrong type", body: "nftables: {syncPeriod: soon}\n", wantErr: "failed to decode"},
		{name: "wrong kind", body: "", wantErr: "no kind"},
		{name: "not YAML", body: "Twas bryllyg, and ye slythy toves", wantErr: "failed to decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := configHeader + tc.body
			if tc.name == "wrong kind" {
				data = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeSchedulerConfiguration\n"
			}
			l, err := load([]byte(data))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range tc.check(l) {
				if c.got != c.want {
					t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
				}
			}
		})
	}
}

// TestNotApplicableWarnings: a field that asks for what svcproxy does not do is
// warned about exactly once, by its path; kube-proxy's defaults and values svcproxy
// honours are not.
func TestNotApplicableWarnings(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{name: "defaults warn about nothing"},
		{name: "kind's conntrack zeros mean leave as is", body: "conntrack: {maxPerCore: 0, min: null, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}\n"},
		{name: "mode iptables is served as nftables silently", body: "mode: iptables\n"},
		{name: "mode ipvs", body: "mode: ipvs\n", want: []string{"mode"}},
		{name: "other mode's section", body: "mode: nftables\niptables: {syncPeriod: 10s, minSyncPeriod: 2s, masqueradeAll: true}\n",
			want: []string{"iptables.masqueradeAll", "iptables.minSyncPeriod", "iptables.syncPeriod"}},
		{name: "own mode's section is applied", body: "mode: nftables\nnftables: {syncPeriod: 10s, minSyncPeriod: 2s, masqueradeAll: true}\n"},
		{name: "nftables section in blank mode", body: "nftables: {syncPeriod: 10s}\n", want: []string{"nftables.syncPeriod"}},
		{name: "marks", body: "iptables: {masqueradeBit: 12}\nnftables: {masqueradeBit: 13}\n", want: []string{"iptables.masqueradeBit", "nftables.masqueradeBit"}},
		{name: "node ports are applied", body: "nodePortAddresses: [primary, 10.0.0.0/8]\niptables: {localhostNodePorts: false}\n"},
		{name: "localhost NodePorts are iptables mode's", body: "mode: nftables\niptables: {localhostNodePorts: false}\n", want: []string{"iptables.localhostNodePorts"}},
		{name: "ipvs section", body: "ipvs: {scheduler: rr, strictARP: true, excludeCIDRs: [10.0.0.0/8], tcpTimeout: 1s, tcpFinTimeout: 1s, udpTimeout: 1s}\n",
			want: []string{"ipvs.excludeCIDRs", "ipvs.scheduler", "ipvs.strictARP", "ipvs.tcpFinTimeout", "ipvs.tcpTimeout", "ipvs.udpTimeout"}},
		{name: "conntrack values", body: "conntrack: {maxPerCore: 65536, min: 1, tcpEstablishedTimeout: 1h, tcpCloseWaitTimeout: 2h, tcpBeLiberal: true, udpTimeout: 30s, udpStreamTimeout: 2m}\n",
			want: []string{"conntrack.maxPerCore", "conntrack.min"}}, // the timeouts are applied

		{name: "local detection", body: "detectLocalMode: InterfaceNamePrefix\ndetectLocal: {interfaceNamePrefix: veth, bridgeInterface: cbr0}\n",
			want: []string{"detectLocal.bridgeInterface", "detectLocal.interfaceNamePrefix", "detectLocalMode"}},
		{name: "windows", body: "winkernel: {networkName: net1, sourceVip: 10.0.0.1, enableDSR: true, rootHnsEndpointName: r, forwardHealthCheckVip: true}\nwindowsRunAsService: true\n",
			want: []string{"windowsRunAsService", "winkernel.enableDSR", "winkernel.forwardHealthCheckVip", "winkernel.networkName", "winkernel.rootHnsEndpointName", "winkernel.sourceVip"}},
		{name: "misc", body: "portRange: 1-2\nbindAddress: 10.0.0.5\n", want: []string{"portRange"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := load([]byte(configHeader + tc.body))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range l.warnings {
				if w.Msg == "Configuration field has no effect in svcproxy" {
					got = append(got, w.KV[1].(string))
				}
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("warned fields %q, want %q", got, tc.want)
			}
		})
	}
}

// TestEveryConfigFieldIsAccountedFor walks KubeProxyConfiguration: every field must
// be applied or have a warning, so that a new kube-proxy field cannot slip by.
func TestEveryConfigFieldIsAccountedFor(t *testing.T) {
	known := map[string]bool{}
	for _, f := range appliedFields {
		known[f] = true
	}
	for _, f := range inertFields {
		known[f.path] = true
	}
	for _, path := range configFieldPaths(reflect.TypeOf(kubeproxyconfig.KubeProxyConfiguration{}), "") {
		parent, _, _ := strings.Cut(path, ".")
		if !known[path] && !known[parent+".*"] {
			t.Errorf("KubeProxyConfiguration field %s is neither applied nor warned about", path)
		}
	}
}

// configFieldPaths lists the JSON paths of a config struct's leaves; logging, a
// component-base type applied as a whole, is one leaf.
func configFieldPaths(typ reflect.Type, prefix string) []string {
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" { // TypeMeta
			continue
		}
		path := prefix + name
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeOf(metav1.Duration{}) && ft != reflect.TypeOf(logsapi.LoggingConfiguration{}) {
			out = append(out, configFieldPaths(ft, path+".")...)
			continue
		}
		out = append(out, path)
	}
	return out
}

// loaded is a --config file as svcproxy runs with it: loaded, then checked.
type loaded struct {
	cfg      *kubeproxyconfig.KubeProxyConfiguration
	gates    featuregate.FeatureGate
	warnings []Warning
	// minSyncSet is File.MinSyncPeriodSet.
	minSyncSet bool
}

// load does what svcproxy does with its --config file's content before it runs.
func load(data []byte) (loaded, error) {
	f, err := decode(data)
	if err != nil {
		return loaded{}, err
	}
	gates, more, err := Check(f.Config)
	return loaded{cfg: f.Config, gates: gates, warnings: append(f.Warnings, more...), minSyncSet: f.MinSyncPeriodSet}, err
}

// The settings of the configured mode's section.
func (l loaded) sync() time.Duration    { s, _, _, _ := ModeSection(l.cfg); return s.Duration }
func (l loaded) minSync() time.Duration { _, m, _, _ := ModeSection(l.cfg); return m.Duration }
func (l loaded) masqueradeAll() bool    { _, _, m, _ := ModeSection(l.cfg); return *m }

// warned reports whether some warning mentions all of parts.
func (l loaded) warned(parts ...string) bool {
	for _, w := range l.warnings {
		s := w.Msg + " " + fmt.Sprint(w.KV...)
		all := true
		for _, p := range parts {
			all = all && strings.Contains(s, p)
		}
		if all {
			return true
		}
	}
	return false
}

// check is one value a test looks at.
type check struct {
	what      string
	got, want any
}

// TestConfigFileNotReadable: --config names something that is not a small regular
// file: svcproxy refuses at once, saying which file and why, instead of blocking on
// a named pipe nobody writes or reading /dev/zero until memory runs out.
func TestConfigFileNotReadable(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.conf")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.conf")
	if err := os.WriteFile(big, []byte(configHeader+"#"+strings.Repeat("x", maxBytes)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	zeroLink := filepath.Join(dir, "zero.conf")
	if err := os.Symlink("/dev/zero", zeroLink); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, wantErr string
	}{
		{"a named pipe nobody writes", fifo, "--config: " + fifo + " is a named pipe (FIFO), not a regular file: not read"},
		{"a character device", "/dev/zero", "--config: /dev/zero is a character device, not a regular file: not read"},
		{"a link to a character device", zeroLink, "--config: " + zeroLink + " is a character device, not a regular file"},
		{"a directory", dir, "--config: " + dir + " is a directory, not a regular file"},
		{"over the cap", big, "--config: " + big + " is 1048652 bytes (1 MiB), over the cap of 1 MiB: not read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := Load(tc.path)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Load blocked for 5 s")
			}
		})
	}
}
