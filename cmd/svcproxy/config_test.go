package main

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

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
)

const configHeader = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"

// writeConfigFile writes a KubeProxyConfiguration (header added) to a temp file.
func writeConfigFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.conf")
	if err := os.WriteFile(path, []byte(configHeader+body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigFile reads files field by field: what each applies to svcproxy's
// options, and which values are refused, naming the field.
func TestConfigFile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string
		check   func(t *testing.T, o *options)
		wantErr string
	}{
		{
			name: "empty file: kube-proxy's defaults, iptables section",
			check: func(t *testing.T, o *options) {
				want(t, "syncPeriod", o.syncPeriod, 30*time.Second)
				want(t, "minSyncPeriod", o.minSyncPeriod, time.Second)
				want(t, "metricsAddr", o.metricsAddr, "127.0.0.1:10249")
				want(t, "healthzAddr", o.healthzAddr, "0.0.0.0:10256")
				want(t, "contentType", o.config.ClientConnection.ContentType, "application/vnd.kubernetes.protobuf")
				want(t, "qps", o.config.ClientConnection.QPS, float32(5))
				want(t, "burst", o.config.ClientConnection.Burst, int32(10))
				want(t, "configSyncPeriod", o.config.ConfigSyncPeriod.Duration, 15*time.Minute)
				want(t, "oomScoreAdj", *o.config.OOMScoreAdj, int32(-999))
				want(t, "logging.format", o.config.Logging.Format, "text")
				want(t, "kubeconfig", o.kubeconfig, "")
			},
		},
		{
			name: "nftables mode reads the nftables section",
			body: "mode: nftables\nnftables: {syncPeriod: 20s, minSyncPeriod: 2s, masqueradeAll: true}\niptables: {masqueradeAll: false}\n",
			check: func(t *testing.T, o *options) {
				want(t, "syncPeriod", o.syncPeriod, 20*time.Second)
				want(t, "minSyncPeriod", o.minSyncPeriod, 2*time.Second)
				want(t, "masqueradeAll", o.masqueradeAll, true)
			},
		},
		{
			name: "iptables mode reads the iptables section, not nftables'",
			body: "mode: iptables\niptables: {syncPeriod: 40s, minSyncPeriod: 3s, masqueradeAll: true}\nnftables: {syncPeriod: 20s}\n",
			check: func(t *testing.T, o *options) {
				want(t, "syncPeriod", o.syncPeriod, 40*time.Second)
				want(t, "minSyncPeriod", o.minSyncPeriod, 3*time.Second)
				want(t, "masqueradeAll", o.masqueradeAll, true)
			},
		},
		{
			name: "ipvs mode reads ipvs' periods and iptables' masqueradeAll",
			body: "mode: ipvs\nipvs: {syncPeriod: 50s, minSyncPeriod: 5s}\niptables: {masqueradeAll: true}\n",
			check: func(t *testing.T, o *options) {
				want(t, "syncPeriod", o.syncPeriod, 50*time.Second)
				want(t, "minSyncPeriod", o.minSyncPeriod, 5*time.Second)
				want(t, "masqueradeAll", o.masqueradeAll, true)
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
			check: func(t *testing.T, o *options) {
				want(t, "kubeconfig", o.kubeconfig, "/var/lib/kube-proxy/kubeconfig.conf")
				want(t, "contentType", o.config.ClientConnection.ContentType, "application/json")
				want(t, "acceptContentTypes", o.config.ClientConnection.AcceptContentTypes, "application/json")
				want(t, "qps", o.config.ClientConnection.QPS, float32(50))
				want(t, "burst", o.config.ClientConnection.Burst, int32(100))
				want(t, "hostnameOverride", o.hostnameOverride, "Node-A") // lowercased where the node name is made
				want(t, "clusterCIDR", o.clusterCIDRFor(endpoints.IPv4).String(), "10.244.0.0/16")
				want(t, "healthzAddr", o.healthzAddr, "10.0.0.1:10256")
				want(t, "metricsAddr", o.metricsAddr, "0.0.0.0:10249")
				want(t, "configSyncPeriod", o.config.ConfigSyncPeriod.Duration, 5*time.Minute)
				want(t, "oomScoreAdj", *o.config.OOMScoreAdj, int32(-500))
				want(t, "enableProfiling", o.config.EnableProfiling, true)
			},
		},
		{
			name: "IPv6 bindAddress defaults the servers to IPv6",
			body: "bindAddress: \"::\"\n",
			check: func(t *testing.T, o *options) {
				want(t, "healthzAddr", o.healthzAddr, "[::]:10256")
				want(t, "metricsAddr", o.metricsAddr, "[::1]:10249")
			},
		},
		{
			name: "logging section: json, verbosity",
			body: "logging: {format: json, verbosity: 3}\n",
			check: func(t *testing.T, o *options) {
				want(t, "logging.format", o.config.Logging.Format, "json")
				want(t, "logging.verbosity", o.config.Logging.Verbosity, logsapi.VerbosityLevel(3))
			},
		},
		{
			name: "logging section: vmodule, split stream with its gate",
			body: "featureGates: {LoggingAlphaOptions: true}\nlogging: {vmodule: [{filePattern: serve, verbosity: 4}], options: {text: {splitStream: true}}}\n",
			check: func(t *testing.T, o *options) {
				want(t, "logging.vmodule", fmt.Sprint(o.config.Logging.VModule), "[{serve 4}]")
				want(t, "logging.options.text.splitStream", o.config.Logging.Options.Text.SplitStream, true)
			},
		},
		{
			name: "unknown field: a warning, as kube-proxy's lenient v1alpha1 decoding",
			body: "foo: bar\nclusterCIDR: 10.244.0.0/16\n",
			check: func(t *testing.T, o *options) {
				want(t, "clusterCIDR", o.clusterCIDR, "10.244.0.0/16")
				wantWarning(t, o, `unknown field "foo"`)
			},
		},
		{
			name: "duplicate field: a warning, the last value wins",
			body: "clusterCIDR: 10.1.0.0/16\nclusterCIDR: 10.244.0.0/16\n",
			check: func(t *testing.T, o *options) {
				want(t, "clusterCIDR", o.clusterCIDR, "10.244.0.0/16")
				wantWarning(t, o, `key "clusterCIDR" already set`)
			},
		},
		{
			name: "unknown feature gate: a warning naming it; logging gates apply",
			body: "featureGates: {KubeProxySomething: true, LoggingAlphaOptions: true}\nlogging: {options: {text: {splitStream: true}}}\n",
			check: func(t *testing.T, o *options) {
				wantWarning(t, o, "featureGates.KubeProxySomething")
				want(t, "LoggingAlphaOptions", o.gates.Enabled(logsapi.LoggingAlphaOptions), true)
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
			path := writeConfigFile(t, tc.body)
			if tc.name == "wrong kind" {
				if err := os.WriteFile(path, []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeSchedulerConfiguration\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			o, err := parseFlags([]string{"--config", path})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}

// TestConfigFlagPrecedence: with --config, kube-proxy takes everything from the file
// but --hostname-override, --master, --cleanup and the logging flags.
func TestConfigFlagPrecedence(t *testing.T) {
	file := writeConfigFile(t, `hostnameOverride: from-file
clusterCIDR: 10.244.0.0/16
mode: nftables
nftables: {syncPeriod: 20s}
logging: {verbosity: 2, vmodule: [{filePattern: serve, verbosity: 4}]}
`)
	o, err := parseFlags([]string{"--config", file, "--hostname-override= Node-B ", "--cluster-cidr=10.9.0.0/16",
		"--sync-period=7s", "--iptables-sync-period=8s", "--master=https://10.0.0.1:6443", "-v=5", "--vmodule=flags=3",
		"--cleanup", "--kube-api-qps=99", "--takeover=false"})
	if err != nil {
		t.Fatal(err)
	}
	want(t, "hostnameOverride (flag wins)", o.hostnameOverride, "node-b")
	want(t, "clusterCIDR (file wins)", o.clusterCIDR, "10.244.0.0/16")
	want(t, "syncPeriod (file wins)", o.syncPeriod, 20*time.Second)
	want(t, "qps (file's default wins)", o.config.ClientConnection.QPS, float32(5))
	want(t, "master (flag applies)", o.master, "https://10.0.0.1:6443")
	want(t, "cleanup (flag applies)", o.cleanup, true)
	want(t, "takeover=false (svcproxy's flag applies)", o.noTakeover, true)
	want(t, "verbosity (flag wins)", o.config.Logging.Verbosity, logsapi.VerbosityLevel(5))
	want(t, "vmodule (flag's first, then file's)", fmt.Sprint(o.config.Logging.VModule), "[{flags 3} {serve 4}]")
	for _, flag := range []string{"--cluster-cidr", "--sync-period", "--iptables-sync-period", "--kube-api-qps"} {
		wantWarning(t, o, "flag ignored because --config is given", flag)
	}
	for _, w := range o.warnings {
		if s := fmt.Sprint(w.kv...); strings.Contains(s, "hostname-override") || strings.Contains(s, "--master") || strings.Contains(s, "--cleanup") || strings.Contains(s, "--takeover") || strings.Contains(s, "flag--v") {
			t.Errorf("warned about a flag that applies: %s %v", w.msg, w.kv)
		}
	}
}

// TestFlagsWithoutConfig: without --config the kube-proxy flags set the same
// configuration the file would, and the mode picks which sync-period flags count.
func TestFlagsWithoutConfig(t *testing.T) {
	for _, tc := range []struct {
		name           string
		args           []string
		sync, minSync  time.Duration
		masq           bool
		healthz, metrs string
	}{
		{name: "iptables flags in blank mode", args: []string{"--iptables-sync-period=11s", "--iptables-min-sync-period=2s", "--ipvs-sync-period=99s"}, sync: 11 * time.Second, minSync: 2 * time.Second, healthz: "0.0.0.0:10256", metrs: "127.0.0.1:10249"},
		{name: "iptables flags in nftables mode", args: []string{"--proxy-mode=nftables", "--iptables-sync-period=12s", "--masquerade-all"}, sync: 12 * time.Second, minSync: time.Second, masq: true, healthz: "0.0.0.0:10256", metrs: "127.0.0.1:10249"},
		{name: "ipvs flags only in ipvs mode", args: []string{"--proxy-mode=ipvs", "--iptables-sync-period=12s", "--ipvs-sync-period=13s", "--ipvs-min-sync-period=3s"}, sync: 13 * time.Second, minSync: 3 * time.Second, healthz: "0.0.0.0:10256", metrs: "127.0.0.1:10249"},
		{name: "svcproxy's --sync-period in any mode", args: []string{"--proxy-mode=ipvs", "--sync-period=14s", "--min-sync-period=4s"}, sync: 14 * time.Second, minSync: 4 * time.Second, healthz: "0.0.0.0:10256", metrs: "127.0.0.1:10249"},
		{name: "deprecated port flags", args: []string{"--healthz-port=0", "--metrics-bind-address=127.0.0.2", "--metrics-port=10999"}, sync: 30 * time.Second, minSync: time.Second, metrs: "127.0.0.2:10999"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			silenceStderr(t)
			o, err := parseFlags(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			want(t, "syncPeriod", o.syncPeriod, tc.sync)
			want(t, "minSyncPeriod", o.minSyncPeriod, tc.minSync)
			want(t, "masqueradeAll", o.masqueradeAll, tc.masq)
			want(t, "healthzAddr", o.healthzAddr, tc.healthz)
			want(t, "metricsAddr", o.metricsAddr, tc.metrs)
		})
	}
	silenceStderr(t)
	if _, err := parseFlags([]string{"--proxy-mode=nftables", "--sync-period=-1s"}); err == nil || !strings.Contains(err.Error(), `nftables.syncPeriod: Invalid value: "-1s"`) {
		t.Errorf("negative --sync-period: got %v, want the nftables.syncPeriod error", err)
	}
	if _, err := parseFlags([]string{"--hostname-override", "  "}); err == nil || !strings.Contains(err.Error(), "empty hostname-override is invalid") {
		t.Errorf("blank --hostname-override: got %v", err)
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
			o, err := parseFlags([]string{"--config", writeConfigFile(t, tc.body)})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range o.warnings {
				if w.msg == "Configuration field has no effect in svcproxy" {
					got = append(got, w.kv[1].(string))
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

func want[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// wantWarning checks that some warning mentions all of parts.
func wantWarning(t *testing.T, o *options, parts ...string) {
	t.Helper()
	for _, w := range o.warnings {
		s := w.msg + " " + fmt.Sprint(w.kv...)
		all := true
		for _, p := range parts {
			all = all && strings.Contains(s, p)
		}
		if all {
			return
		}
	}
	t.Errorf("no warning mentions %q; warnings: %v", parts, o.warnings)
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
	if err := os.WriteFile(big, []byte(configHeader+"#"+strings.Repeat("x", maxConfigBytes)+"\n"), 0o644); err != nil {
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
				_, err := parseFlags([]string{"--config", tc.path})
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("parseFlags blocked for 5 s")
			}
		})
	}
}
