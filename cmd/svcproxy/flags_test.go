package main

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/svcproxy/svcproxy/pkg/agent"
	"github.com/svcproxy/svcproxy/pkg/config"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nodeaddr"
)

func TestParseFlags(t *testing.T) {
	defaults := options{Options: agent.Options{
		SyncPeriod:    30 * time.Second,
		MinSyncPeriod: time.Second,
		MetricsAddr:   "127.0.0.1:10249",
		HealthzAddr:   "0.0.0.0:10256",
		BindAddress:   "0.0.0.0",
		// iptables mode's: every local address, localhost too.
		NodePorts:          nodeaddr.Spec{All: true},
		LocalhostNodePorts: true,
		SysctlDir:          "/proc/sys",
	}}
	for _, tc := range []struct {
		name    string
		args    []string
		want    func(o *options) // adjusts defaults to the expected result
		ignored map[string]string
		cidr    string // expected ipv4ClusterCIDR, "" for none
		wantErr string
	}{
		{name: "no flags keeps kube-proxy's defaults", want: func(*options) {}},
		{
			name: "kube-proxy flags, = and space forms, do not swallow the next flag",
			args: []string{"--proxy-mode=iptables", "--conntrack-max-per-core", "0", "--hostname-override", "node-a",
				"--boot-id-file", "/x", "--masquerade-all", "--feature-gates=A=true,B=false", "--sync-period=5s"},
			want: func(o *options) {
				o.HostnameOverride, o.MasqueradeAll, o.SyncPeriod = "node-a", true, 5*time.Second
			},
			ignored: map[string]string{"boot-id-file": "/x"},
		},
		{
			name: "unknown flags, = and space forms, are skipped and later flags still apply",
			args: []string{"--totally-unknown=1", "--min-sync-period", "2s", "--totally-unknown2", "value",
				"--metrics-bind-address", "127.0.0.1:9999", "--kubeconfig=/kc"},
			want: func(o *options) {
				o.MinSyncPeriod, o.MetricsAddr, o.Kubeconfig = 2*time.Second, "127.0.0.1:9999", "/kc"
				o.MinSyncPeriodSet = true // kube-proxy's fixed spacing, not svcproxy's by cost
			},
		},
		{
			name: "own flags",
			args: []string{"--master", "https://api:6443", "--healthz-bind-address", "", "--cleanup", "--manifests", "/m", "-v", "2",
				"--sysctl-dir=/host/proc/sys"},
			want: func(o *options) {
				o.Master, o.HealthzAddr, o.Cleanup, o.Manifests, o.SysctlDir = "https://api:6443", "", true, "/m", "/host/proc/sys"
			},
		},
		{
			name: "IPv4 cluster CIDR",
			args: []string{"--cluster-cidr", "10.244.0.0/16"},
			want: func(o *options) { o.ClusterCIDR = "10.244.0.0/16" },
			cidr: "10.244.0.0/16",
		},
		{
			name: "dual-stack cluster CIDR picks the IPv4 prefix",
			args: []string{"--cluster-cidr", "10.244.0.0/16,fd00::/48"},
			want: func(o *options) { o.ClusterCIDR = "10.244.0.0/16,fd00::/48" },
			cidr: "10.244.0.0/16",
		},
		{
			name: "dual-stack cluster CIDR, IPv6 first, with a space",
			args: []string{"--cluster-cidr=fd00::/48, 10.244.0.0/16"},
			want: func(o *options) { o.ClusterCIDR = "fd00::/48, 10.244.0.0/16" },
			cidr: "10.244.0.0/16",
		},
		{
			name: "IPv6-only cluster CIDR has no IPv4 prefix",
			args: []string{"--cluster-cidr", "fd00::/48"},
			want: func(o *options) { o.ClusterCIDR = "fd00::/48" },
		},
		{name: "bad node port address fails", args: []string{"--nodeport-addresses", "10.0.0.0/8,10.1.2.3"}, wantErr: `nodePortAddresses[1]: Invalid value: "10.1.2.3"`},
		{name: "bad cluster CIDR fails", args: []string{"--cluster-cidr", "bad"}, wantErr: `clusterCIDR[0]: Invalid value: "bad"`},
		{name: "one bad entry of a dual-stack CIDR fails", args: []string{"--cluster-cidr", "10.244.0.0/16,nope"}, wantErr: `clusterCIDR[1]: Invalid value: "nope"`},
		{name: "bad duration fails", args: []string{"--sync-period", "soon"}, wantErr: "sync-period"},
		{name: "own flag without its value fails", args: []string{"--hostname-override"}, wantErr: "hostname-override"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stderr := silenceStderr(t)
			o, err := parseFlags(tc.args)
			t.Logf("stderr: %s", stderr())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseFlags(%q) = %v, want an error containing %q", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseFlags(%q): %v", tc.args, err)
			}
			want := defaults
			tc.want(&want)
			got := *o
			got.ignored, got.Config, got.gates, got.warnings = nil, nil, nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("parseFlags(%q)\n got %+v\nwant %+v", tc.args, got, want)
			}
			for name, v := range tc.ignored {
				if p := o.ignored[name]; p == nil || *p != v {
					t.Errorf("ignored flag --%s: got %v, want %q", name, p, v)
				}
			}
			var wantCIDR netip.Prefix
			if tc.cidr != "" {
				wantCIDR = netip.MustParsePrefix(tc.cidr)
			}
			if got := config.ClusterCIDRFor(o.ClusterCIDR, endpoints.IPv4); got != wantCIDR {
				t.Errorf("ipv4ClusterCIDR() = %v, want %v", got, wantCIDR)
			}
		})
	}
}

// TestUnknownFlagWarning checks that an unknown flag is reported on stderr, and a
// known or kube-proxy one is not.
func TestUnknownFlagWarning(t *testing.T) {
	stderr := silenceStderr(t)
	if _, err := parseFlags([]string{"--totally-unknown=1", "--proxy-mode", "ipvs", "--sync-period=1m", "-v=1"}); err != nil {
		t.Fatal(err)
	}
	out := stderr()
	if !strings.Contains(out, "unknown flag --totally-unknown ignored") {
		t.Errorf("no warning for --totally-unknown in %q", out)
	}
	for _, known := range []string{"--proxy-mode ", "--sync-period ", "--v "} {
		if strings.Contains(out, "unknown flag "+known) {
			t.Errorf("%s reported unknown: %q", known, out)
		}
	}
}

// silenceStderr redirects os.Stderr to a pipe until the test ends; the returned
// function restores it and returns what was written.
func silenceStderr(t *testing.T) func() string {
	t.Helper()
	restore, read := capture(t, &os.Stderr)
	t.Cleanup(func() { restore() })
	return func() string { restore(); return read() }
}

// capture redirects *f to a pipe that is drained concurrently.
func capture(t *testing.T, f **os.File) (restore func(), read func() string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	orig := *f
	*f = w
	var buf strings.Builder
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&buf, r); close(done) }()
	restored := false
	restore = func() {
		if restored {
			return
		}
		restored = true
		*f = orig
		w.Close()
		<-done
		r.Close()
	}
	return restore, func() string { restore(); return buf.String() }
}

func TestRenderCommand(t *testing.T) {
	dir := t.TempDir()
	slice := strings.ReplaceAll(string(mustReadSeed(t)), "10.244.1.3", "10.244.1.9")
	if err := os.WriteFile(dir+"/seed.yaml", []byte(slice), 0o644); err != nil {
		t.Fatal(err)
	}
	const np = "testdata/nodeports"
	const ds = "testdata/dualstack"
	local := t.TempDir()
	itpLocal := strings.Replace(string(mustReadSeed(t)), "  selector:", "  internalTrafficPolicy: Local\n  selector:", 1)
	if err := os.WriteFile(local+"/seed.yaml", []byte(itpLocal), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		contains []string
		absent   []string
	}{
		{
			name:     "embedded seed example",
			args:     []string{"render"},
			contains: []string{"table ip svcproxy", ": 10.244.1.2 . 80", ": 10.244.1.3 . 80", "10.96.0.10"},
		},
		{
			name:     "directory given with -f",
			args:     []string{"render", "-f", dir},
			contains: []string{"table ip svcproxy", ": 10.244.1.2 . 80", ": 10.244.1.9 . 80"},
			absent:   []string{"10.244.1.3 . 80"},
		},
		{
			name:     "cluster CIDR adds masquerading of traffic from outside it",
			args:     []string{"render", "--cluster-cidr", "10.244.0.0/16"},
			contains: []string{"10.244.0.0/16", "masquerade"},
		},
		{
			name:     "hostname-override: internalTrafficPolicy Local uses this node's endpoints",
			args:     []string{"render", "-f", local, "--hostname-override", "Worker"},
			contains: []string{": 10.244.1.2 . 80"},
		},
		{
			name:   "without it the node has none",
			args:   []string{"render", "-f", local},
			absent: []string{": 10.244.1.2 . 80"},
		},
		{
			name:     "render --node-ip --nodeport-addresses: NodePorts on the selected address only",
			args:     []string{"render", "-f", np, "--node-ip", "172.18.0.3,10.0.0.5", "--nodeport-addresses", "10.0.0.0/8"},
			contains: []string{"set nodeport-ips {", "elements = { 10.0.0.5 }", "tcp . 30080"},
			absent:   []string{"172.18.0.3"},
		},
		{
			name:     "trace: a NodePort from outside goes to every endpoint, masqueraded",
			args:     []string{"trace", "-f", np, "--node-ip", "172.18.0.3", "203.0.113.7", "172.18.0.3:30080"},
			contains: []string{"dnat 10.244.1.2:80 masquerade\n", "dnat 10.244.2.2:80 masquerade\n"},
		},
		{
			name:     "trace: without --node-ip the node's address is not known to be local",
			args:     []string{"trace", "-f", np, "203.0.113.7", "172.18.0.3:30080"},
			contains: []string{"accept\n"},
			absent:   []string{"dnat"},
		},
		{
			name:     "trace: not on an address --nodeport-addresses selects",
			args:     []string{"trace", "-f", np, "--node-ip", "172.18.0.3", "--nodeport-addresses", "10.0.0.0/8", "203.0.113.7", "172.18.0.3:30080"},
			contains: []string{"accept\n"},
			absent:   []string{"dnat"},
		},
		{
			name:     "trace: externalTrafficPolicy Local keeps the client's address and this node's endpoint",
			args:     []string{"trace", "-f", np, "--node-ip", "172.18.0.3", "--hostname-override", "me", "203.0.113.7", "172.18.0.3:30081"},
			contains: []string{"dnat 10.244.1.3:80\n"},
			absent:   []string{"10.244.2.3", "masquerade"},
		},
		{
			name:     "trace: ... and drops on a node without one",
			args:     []string{"trace", "-f", np, "--node-ip", "172.18.0.3", "--hostname-override", "elsewhere", "203.0.113.7", "172.18.0.3:30081"},
			contains: []string{"drop\n"},
			absent:   []string{"dnat"},
		},
		{
			name:     "trace: localhost NodePort from the node",
			args:     []string{"trace", "-f", np, "--node-ip", "172.18.0.3", "127.0.0.1", "127.0.0.1:30080", "local"},
			contains: []string{"dnat 10.244.1.2:80 masquerade\n"},
		},
		{
			name:   "trace: not with --iptables-localhost-nodeports=false",
			args:   []string{"trace", "-f", np, "--node-ip", "172.18.0.3", "--iptables-localhost-nodeports=false", "127.0.0.1", "127.0.0.1:30080", "local"},
			absent: []string{"dnat"},
		},
		// --node-ip of either family: each family's table serves NodePorts on
		// that family's node addresses (testdata/dualstack: web is a
		// dual-stack NodePort 30090, endpoint fd00:244::2 / 10.244.1.2).
		{
			name:     "render --node-ip IPv4,IPv6: each table's NodePort addresses are its family's",
			args:     []string{"render", "-f", ds, "--node-ip", "172.18.0.3,fd00:172:18::3,fd00:99::5", "--nodeport-addresses", "172.18.0.0/16,fd00:172:18::/64"},
			contains: []string{"elements = { 172.18.0.3 }", "elements = { fd00:172:18::3 }", "tcp . 30090"},
			absent:   []string{"fd00:99::5"},
		},
		{
			name:     "trace: a NodePort on the node's IPv6 address (--node-ip IPv6 only)",
			args:     []string{"trace", "-f", ds, "--node-ip", "fd00:172:18::3", "fd00:172:18::100", "[fd00:172:18::3]:30090"},
			contains: []string{"dnat [fd00:244::2]:80 masquerade\n"},
			absent:   []string{"10.244.1.2"},
		},
		{
			name:     "trace: ... and on its IPv4 address, with both families given",
			args:     []string{"trace", "-f", ds, "--node-ip", "fd00:172:18::3,172.18.0.3", "172.18.0.100", "172.18.0.3:30090"},
			contains: []string{"dnat 10.244.1.2:80 masquerade\n"},
		},
		{
			name:     "trace: an IPv6 address --nodeport-addresses does not select is not a NodePort",
			args:     []string{"trace", "-f", ds, "--node-ip", "fd00:172:18::3", "--nodeport-addresses", "fd00:99::/64", "fd00:172:18::100", "[fd00:172:18::3]:30090"},
			contains: []string{"accept\n"},
			absent:   []string{"dnat"},
		},
		{
			name:   "trace: ::1 is never a NodePort address (no route_localnet in IPv6)",
			args:   []string{"trace", "-f", ds, "--node-ip", "fd00:172:18::3", "::1", "[::1]:30090", "local"},
			absent: []string{"dnat"},
		},
		{name: "bad node IP", args: []string{"render", "--node-ip", "10.0.0"}, code: 2},
		{name: "bad nodeport address", args: []string{"trace", "--nodeport-addresses", "10.0.0.1", "10.244.2.9", "10.96.0.10:80"}, code: 2},
		{name: "missing directory", args: []string{"render", "-f", dir + "/nope"}, code: 1},
		{name: "bad cluster CIDR", args: []string{"render", "--cluster-cidr", "bad"}, code: 2},
		{name: "unknown render flag", args: []string{"render", "--bogus"}, code: 2},
		{
			name:     "trace: a pod reaching the seed Service can land on either endpoint",
			args:     []string{"trace", "10.244.2.9", "10.96.0.10:80"},
			contains: []string{"dnat 10.244.1.2:80\n", "dnat 10.244.1.3:80\n"},
			absent:   []string{"masquerade", "reject"},
		},
		{
			name:     "trace: from outside the pod CIDR it is masqueraded",
			args:     []string{"trace", "--cluster-cidr", "10.244.0.0/16", "172.18.0.5", "10.96.0.10:80/tcp", "local"},
			contains: []string{"dnat 10.244.1.2:80 masquerade", "dnat 10.244.1.3:80 masquerade"},
		},
		{name: "trace: a port the Service lacks is rejected", args: []string{"trace", "10.244.2.9", "10.96.0.10:81/udp"}, contains: []string{"reject"}, absent: []string{"dnat"}},
		{name: "trace: bad destination", args: []string{"trace", "10.244.2.9", "10.96.0.10"}, code: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			silenceStderr(t)
			restore, read := capture(t, &os.Stdout)
			code := run(tc.args)
			restore()
			out := read()
			if code != tc.code {
				t.Fatalf("run(%q) = %d, want %d; stdout:\n%s", tc.args, code, tc.code, out)
			}
			for _, s := range tc.contains {
				if !strings.Contains(out, s) {
					t.Errorf("run(%q) output lacks %q:\n%s", tc.args, s, out)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(out, s) {
					t.Errorf("run(%q) output has %q:\n%s", tc.args, s, out)
				}
			}
			if tc.code != 0 && out != "" {
				t.Errorf("failed command printed output:\n%s", out)
			}
		})
	}
}

func mustReadSeed(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(seedManifests(t) + "/my-nginx.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBareKubeProxyBoolFlags: kube-proxy's boolean flags are valid without a value
// (`--profiling`), so the accepted-and-ignored copies must not take the next
// argument as their value.
func TestBareKubeProxyBoolFlags(t *testing.T) {
	for _, name := range []string{"bind-address-hard-fail", "conntrack-tcp-be-liberal", "init-only",
		"iptables-localhost-nodeports", "ipvs-strict-arp", "profiling", "log-json-split-stream", "log-text-split-stream"} {
		t.Run(name, func(t *testing.T) {
			silenceStderr(t)
			o, err := parseFlags([]string{"--" + name, "--cluster-cidr", "10.244.0.0/16", "--" + name + "=false", "--hostname-override", "node-a"})
			if err != nil {
				t.Fatal(err)
			}
			if o.ClusterCIDR != "10.244.0.0/16" || o.HostnameOverride != "node-a" {
				t.Fatalf("--%s swallowed the next flag: cluster-cidr %q, hostname-override %q", name, o.ClusterCIDR, o.HostnameOverride)
			}
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
	want(t, "hostnameOverride (flag wins)", o.HostnameOverride, "node-b")
	want(t, "clusterCIDR (file wins)", o.ClusterCIDR, "10.244.0.0/16")
	want(t, "syncPeriod (file wins)", o.SyncPeriod, 20*time.Second)
	want(t, "qps (file's default wins)", o.Config.ClientConnection.QPS, float32(5))
	want(t, "master (flag applies)", o.Master, "https://10.0.0.1:6443")
	want(t, "cleanup (flag applies)", o.Cleanup, true)
	want(t, "takeover=false (svcproxy's flag applies)", o.NoTakeover, true)
	want(t, "verbosity (flag wins)", o.Config.Logging.Verbosity, logsapi.VerbosityLevel(5))
	want(t, "vmodule (flag's first, then file's)", fmt.Sprint(o.Config.Logging.VModule), "[{flags 3} {serve 4}]")
	var ignored []string
	for _, w := range o.warnings {
		if w.Msg == "Warning: flag ignored because --config is given, as kube-proxy ignores it" {
			ignored = append(ignored, w.KV[1].(string))
		}
	}
	sort.Strings(ignored)
	if want := []string{"--cluster-cidr", "--iptables-sync-period", "--kube-api-qps", "--sync-period"}; !reflect.DeepEqual(ignored, want) {
		t.Errorf("warned that flags %q are ignored, want %q (the others apply)", ignored, want)
	}
	for _, w := range o.warnings {
		if s := fmt.Sprint(w.KV...); strings.Contains(s, "hostname-override") || strings.Contains(s, "--master") || strings.Contains(s, "--cleanup") || strings.Contains(s, "--takeover") || strings.Contains(s, "flag--v") {
			t.Errorf("warned about a flag that applies: %s %v", w.Msg, w.KV)
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
		minSyncSet     bool
		masq           bool
		healthz, metrs string
	}{
		{name: "iptables flags in blank mode", args: []string{"--iptables-sync-period=11s", "--iptables-min-sync-period=2s", "--ipvs-sync-period=99s"}, sync: 11 * time.Second, minSync: 2 * time.Second, minSyncSet: true, healthz: "0.0.0.0:10256", metrs: "127.0.0.1:10249"},
		{name: "iptables flags in nftables mode", args: []string{"--proxy-mode=nftables", "--iptables-sync-period=12s", "--masquerade-all"}, sync: 12 * time.Second, minSync: time.Second, masq: true, healthz: "0.0.0.0:10256", metrs: "127.0.0.1:10249"},
		{name: "ipvs flags only in ipvs mode", args: []string{"--proxy-mode=ipvs", "--iptables-sync-period=12s", "--ipvs-sync-period=13s", "--ipvs-min-sync-period=3s"}, sync: 13 * time.Second, minSync: 3 * time.Second, minSyncSet: true, healthz: "0.0.0.0:10256", metrs: "127.0.0.1:10249"},
		{name: "svcproxy's --sync-period in any mode", args: []string{"--proxy-mode=ipvs", "--sync-period=14s", "--min-sync-period=4s"}, sync: 14 * time.Second, minSync: 4 * time.Second, minSyncSet: true, healthz: "0.0.0.0:10256", metrs: "127.0.0.1:10249"},
		{name: "deprecated port flags", args: []string{"--healthz-port=0", "--metrics-bind-address=127.0.0.2", "--metrics-port=10999"}, sync: 30 * time.Second, minSync: time.Second, metrs: "127.0.0.2:10999"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			silenceStderr(t)
			o, err := parseFlags(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			want(t, "syncPeriod", o.SyncPeriod, tc.sync)
			want(t, "minSyncPeriod", o.MinSyncPeriod, tc.minSync)
			want(t, "minSyncPeriodSet", o.MinSyncPeriodSet, tc.minSyncSet)
			want(t, "masqueradeAll", o.MasqueradeAll, tc.masq)
			want(t, "healthzAddr", o.HealthzAddr, tc.healthz)
			want(t, "metricsAddr", o.MetricsAddr, tc.metrs)
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

func want[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// TestDualStackFlags: kube-proxy's validation of --cluster-cidr, and
// --nodeport-addresses with CIDRs of both families and primary.
func TestDualStackFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "dual-stack pair", args: []string{"--cluster-cidr", "10.244.0.0/16,fd00:244::/56"}},
		{name: "IPv6 only", args: []string{"--cluster-cidr", "fd00:244::/56"}},
		{name: "two IPv6 CIDRs", args: []string{"--cluster-cidr", "fd00:1::/56,fd00:2::/56"},
			wantErr: `clusterCIDR: Invalid value: "fd00:1::/56,fd00:2::/56": must be a either a single CIDR or dual-stack pair of CIDRs`},
		{name: "three CIDRs", args: []string{"--cluster-cidr", "10.1.0.0/16,fd00::/56,10.2.0.0/16"},
			wantErr: `must be a either a single CIDR or dual-stack pair of CIDRs`},
		{name: "nodeport addresses of both families and primary", args: []string{"--nodeport-addresses", "10.0.0.0/8,fd00::/64,primary"}},
		{name: "bad IPv6 nodeport CIDR", args: []string{"--nodeport-addresses", "fd00::/129"}, wantErr: `nodePortAddresses[0]: Invalid value: "fd00::/129"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			silenceStderr(t)
			_, err := parseFlags(tc.args)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("parseFlags(%q) = %v, want %q", tc.args, err, tc.wantErr)
			}
		})
	}
}
