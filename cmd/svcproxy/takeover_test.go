package main

import (
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/poll"
)

// kubeProxyRules is what iptables-mode kube-proxy leaves on the seed world's node
// when it is stopped (SIGTERM, not --cleanup) while serving the seed Service
// 10.96.0.10:80 -> pod1, pod2; with kubelet's chains, which must stay.
const kubeProxyRules = `*mangle
:KUBE-IPTABLES-HINT - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-PROXY-CANARY - [0:0]
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-FIREWALL - [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-SERVICES - [0:0]
-A INPUT -j KUBE-FIREWALL
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -j KUBE-FIREWALL
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-SEP-AAAAAAAAAAAAAAAA - [0:0]
:KUBE-SEP-BBBBBBBBBBBBBBBB - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-TCOU7JCQXEZGVUNU - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-SEP-AAAAAAAAAAAAAAAA -p tcp -m comment --comment "default/my-nginx" -m tcp -j DNAT --to-destination 10.244.1.2:80
-A KUBE-SEP-BBBBBBBBBBBBBBBB -p tcp -m comment --comment "default/my-nginx" -m tcp -j DNAT --to-destination 10.244.1.3:80
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "default/my-nginx cluster IP" -m tcp --dport 80 -j KUBE-SVC-TCOU7JCQXEZGVUNU
-A KUBE-SVC-TCOU7JCQXEZGVUNU -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-AAAAAAAAAAAAAAAA
-A KUBE-SVC-TCOU7JCQXEZGVUNU -j KUBE-SEP-BBBBBBBBBBBBBBBB
COMMIT
`

// kubeProxyChain matches a chain of kube-proxy's in iptables-save output.
var kubeProxyChain = regexp.MustCompile(`KUBE-(SERVICES|SVC-|SEP-|MARK-MASQ|POSTROUTING|FORWARD|PROXY-CANARY)`)

func installKubeProxyLeftovers(t *testing.T, node *netnstest.NS) {
	t.Helper()
	requireIptablesNft(t)
	node.MustRun(t, "sh", "-c", `printf '%s' "$0" | iptables-nft-restore --noflush`, kubeProxyRules)
	node.MustRun(t, "nft", "add", "table", "ip", "kube-proxy")
	node.MustRun(t, "nft", "add", "chain", "ip", "kube-proxy", "services")
}

func requireIptablesNft(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("iptables-nft-restore"); err != nil {
		t.Skip("needs iptables-nft-restore for kube-proxy's leftovers (`make test` installs iptables)")
	}
}

// kubeProxyLeft returns kube-proxy's chains and jumps, and its table, still in the
// node's kernel.
func kubeProxyLeft(t *testing.T, node *netnstest.NS) []string {
	t.Helper()
	var left []string
	for _, l := range strings.Split(node.MustRun(t, "iptables-nft-save"), "\n") {
		if kubeProxyChain.MatchString(l) {
			left = append(left, l)
		}
	}
	if tables := node.MustRun(t, "nft", "list", "tables"); strings.Contains(tables, "kube-proxy") {
		left = append(left, "table ip kube-proxy")
	}
	return left
}

// kubeletLeft reports whether kubelet's chains and its jumps are all still there.
func kubeletLeft(t *testing.T, node *netnstest.NS) error {
	save := node.MustRun(t, "iptables-nft-save")
	for _, want := range []string{":KUBE-IPTABLES-HINT", ":KUBE-KUBELET-CANARY", ":KUBE-FIREWALL",
		"-A INPUT -j KUBE-FIREWALL", "-A OUTPUT -j KUBE-FIREWALL", `--comment "block incoming localnet connections"`} {
		if !strings.Contains(save, want) {
			return fmt.Errorf("kubelet's %q is gone:\n%s", want, save)
		}
	}
	return nil
}

// TestTakeoverAtStartKeepsTrafficFlowing: a node whose kube-proxy (iptables mode) was
// just stopped still serves the ClusterIP with kube-proxy's rules; svcproxy starts
// while a client opens 20 connections a second, and once its first sync is done it
// removes kube-proxy's chains and jumps, and the kube-proxy table. Not one connection
// may fail, kubelet's chains stay, and the metric counts what went.
func TestTakeoverAtStartKeepsTrafficFlowing(t *testing.T) {
	netnstest.RequireRoot(t)
	svcproxyBin(t)
	w, client := seedWorld(t)
	installKubeProxyLeftovers(t, w.Node)
	if _, err := client.Get(clusterIP, time.Second); err != nil {
		t.Fatalf("kube-proxy's rules do not serve the ClusterIP before svcproxy starts: %v", err)
	}
	logPath := filepath.Join(t.TempDir(), "svcproxy.log")
	dumpLogOnFailure(t, "svcproxy", logPath)

	var (
		mu       sync.Mutex
		answers  = map[string]int{}
		failures []string
		wg       sync.WaitGroup
	)
	stop, stopped := make(chan struct{}), make(chan struct{})
	start := time.Now()
	go func() {
		defer close(stopped) // wg.Add must not race wg.Wait
		tick := time.NewTicker(time.Second / 20)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func(n int) {
				defer wg.Done()
				body, err := client.Get(clusterIP, time.Second)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures = append(failures, fmt.Sprintf("request %d at %v: %v", n, time.Since(start).Round(time.Millisecond), err))
					return
				}
				answers[body]++
			}(n)
		}
	}()
	time.Sleep(500 * time.Millisecond)
	startSvcproxy(t, w.Node, logPath, "--manifests", seedManifests(t), "--metrics-bind-address", metricsAddr, "--healthz-bind-address", healthzAddr)
	poll.Eventually(t, 10*time.Second, "kube-proxy's rules to be removed", func() (bool, string) {
		left := kubeProxyLeft(t, w.Node)
		return len(left) == 0, fmt.Sprintf("left: %q", left)
	})
	tookOver := time.Since(start)
	time.Sleep(time.Second) // traffic on our rules alone
	close(stop)
	<-stopped
	wg.Wait()
	t.Logf("svcproxy started at 500ms, kube-proxy's rules gone by %v; answers %v", tookOver.Round(time.Millisecond), answers)
	if len(failures) > 0 {
		t.Errorf("%d connections failed across the takeover:\n%s", len(failures), strings.Join(failures, "\n"))
	}
	if answers["pod1"] == 0 || answers["pod2"] == 0 || len(answers) != 2 {
		t.Errorf("answers %v: want both pod1 and pod2 and nothing else", answers)
	}
	if err := kubeletLeft(t, w.Node); err != nil {
		t.Error(err)
	}
	metrics := getMetrics(t, w.Node)
	for _, want := range []string{
		`svcproxy_takeover_removed_objects_total{kind="iptables-chain"} 9`,
		`svcproxy_takeover_removed_objects_total{kind="iptables-jump-rule"} 6`,
		`svcproxy_takeover_removed_objects_total{kind="nftables-table"} 1`,
		`svcproxy_takeover_removed_objects_total{kind="ipvs-service"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q:\n%s", want, grepLines(metrics, "svcproxy_takeover"))
		}
	}
}

// TestTakeoverOffAndCleanup: with --takeover=false kube-proxy's rules stay (to run
// next to a kube-proxy), with --cleanup too (only svcproxy's table goes: the way back
// once kube-proxy serves again); --cleanup alone removes them with svcproxy's own
// table, and only them, like kube-proxy --cleanup.
func TestTakeoverOffAndCleanup(t *testing.T) {
	netnstest.RequireRoot(t)
	svcproxyBin(t)
	node := netnstest.New(t, "node")
	installKubeProxyLeftovers(t, node)
	before := kubeProxyLeft(t, node)
	logPath := filepath.Join(t.TempDir(), "svcproxy.log")
	dumpLogOnFailure(t, "svcproxy", logPath)

	d := startSvcproxy(t, node, logPath, "--takeover=false", "--manifests", seedManifests(t),
		"--metrics-bind-address", metricsAddr, "--healthz-bind-address", healthzAddr)
	waitSynced(t, node, healthzAddr)
	if code := d.stop(t); code != 0 {
		t.Fatalf("svcproxy exited %d on SIGTERM", code)
	}
	if left := kubeProxyLeft(t, node); strings.Join(left, "\n") != strings.Join(before, "\n") {
		t.Fatalf("--takeover=false changed kube-proxy's rules:\nbefore %q\nafter %q", before, left)
	}

	// The way back without a gap: kube-proxy serves again, then only our table goes.
	if out, err := node.Run(svcproxyBin(t), "--cleanup", "--takeover=false"); err != nil {
		t.Fatalf("--cleanup --takeover=false: %v: %s", err, out)
	}
	if tables := node.MustRun(t, "nft", "list", "tables"); strings.Contains(tables, "svcproxy") {
		t.Errorf("svcproxy's table after --cleanup --takeover=false:\n%s", tables)
	}
	if left := kubeProxyLeft(t, node); strings.Join(left, "\n") != strings.Join(before, "\n") {
		t.Fatalf("--cleanup --takeover=false changed kube-proxy's rules:\nbefore %q\nafter %q", before, left)
	}

	if out, err := node.Run(svcproxyBin(t), "--cleanup"); err != nil {
		t.Fatalf("--cleanup: %v: %s", err, out)
	}
	if left := kubeProxyLeft(t, node); len(left) != 0 {
		t.Errorf("kube-proxy's rules after --cleanup: %q", left)
	}
	if err := kubeletLeft(t, node); err != nil {
		t.Error(err)
	}
	if tables := node.MustRun(t, "nft", "list", "tables"); strings.Contains(tables, "svcproxy") {
		t.Errorf("svcproxy's table after --cleanup:\n%s", tables)
	}
}

func getMetrics(t *testing.T, ns *netnstest.NS) string {
	t.Helper()
	resp, err := ns.HTTPClient(time.Second).Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestTakeoverFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		off  bool
	}{
		{nil, false},
		{[]string{"--takeover=false"}, true},
		{[]string{"--takeover=true"}, false},
		{[]string{"--takeover", "--cleanup"}, false}, // a bare --takeover takes no value
	} {
		o, err := parseFlags(tc.args)
		if err != nil {
			t.Fatalf("parseFlags(%q): %v", tc.args, err)
		}
		if o.NoTakeover != tc.off {
			t.Errorf("parseFlags(%q): takeover off = %v, want %v", tc.args, o.NoTakeover, tc.off)
		}
		if len(tc.args) == 2 && !o.Cleanup {
			t.Errorf("parseFlags(%q) swallowed --cleanup", tc.args)
		}
	}
}

// TestOurRulesDecideWhileKubeProxysExist backs the ordering svcproxy relies on: once
// our table is programmed, new connections follow our rules even while kube-proxy's
// are still there (NAT chains of one priority run newest first, and the first to
// translate decides). kube-proxy's leftovers here send the ClusterIP to an endpoint
// that is gone; with --takeover=false both rule sets stay, and every connection must
// still reach the seed pods.
func TestOurRulesDecideWhileKubeProxysExist(t *testing.T) {
	netnstest.RequireRoot(t)
	svcproxyBin(t)
	w, client := seedWorld(t)
	stale := strings.NewReplacer("10.244.1.2:80", "10.244.1.99:80", "10.244.1.3:80", "10.244.1.99:80").Replace(kubeProxyRules)
	requireIptablesNft(t)
	w.Node.MustRun(t, "sh", "-c", `printf '%s' "$0" | iptables-nft-restore --noflush`, stale)
	if _, err := client.Get(clusterIP, 500*time.Millisecond); err == nil {
		t.Fatal("the ClusterIP answers through kube-proxy's stale rules; the test proves nothing")
	}
	logPath := filepath.Join(t.TempDir(), "svcproxy.log")
	dumpLogOnFailure(t, "svcproxy", logPath)
	startSvcproxy(t, w.Node, logPath, "--takeover=false", "--manifests", seedManifests(t),
		"--metrics-bind-address", metricsAddr, "--healthz-bind-address", healthzAddr)
	waitSynced(t, w.Node, healthzAddr)
	if left := kubeProxyLeft(t, w.Node); len(left) == 0 {
		t.Fatal("kube-proxy's rules are gone; the test proves nothing")
	}
	answers := map[string]int{}
	for i := 0; i < 20; i++ {
		body, err := client.Get(clusterIP, time.Second)
		if err != nil {
			t.Fatalf("request %d failed with both rule sets in place (kube-proxy's decided?): %v", i, err)
		}
		answers[body]++
	}
	if answers["pod1"] == 0 || answers["pod2"] == 0 {
		t.Errorf("answers %v: want both seed pods", answers)
	}
}

// TestCleanupNamesIptablesLegacyLeftovers: netlink cannot edit iptables-legacy, so
// --cleanup leaves kube-proxy's legacy chains and says, once, which they are and
// what to run.
func TestCleanupNamesIptablesLegacyLeftovers(t *testing.T) {
	netnstest.RequireRoot(t)
	if _, err := exec.LookPath("iptables-legacy-restore"); err != nil {
		t.Skip("needs iptables-legacy-restore (`make test` installs iptables)")
	}
	node := netnstest.New(t, "legacy")
	node.MustRun(t, "sh", "-c", `printf '%s' "$0" | iptables-legacy-restore`, kubeProxyRules)
	out, err := node.Run(svcproxyBin(t), "--cleanup")
	if err != nil {
		t.Fatalf("--cleanup: %v: %s", err, out)
	}
	for _, want := range []string{
		`"Warning: kube-proxy's iptables-legacy rules remain; netlink cannot edit iptables-legacy, run this on the node"`,
		`"ip nat KUBE-SERVICES"`, `"ip filter KUBE-FORWARD"`, `"ip mangle KUBE-PROXY-CANARY"`,
		`command="iptables-legacy-save -c | grep -vE`,
	} {
		if strings.Count(out, want) != 1 {
			t.Errorf("--cleanup output has %q %d times, want once:\n%s", want, strings.Count(out, want), out)
		}
	}
	if strings.Contains(out, `"ip filter KUBE-FIREWALL"`) {
		t.Errorf("kubelet's KUBE-FIREWALL reported as kube-proxy's:\n%s", out)
	}
}
