//go:build e2enode

package e2enode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/test/conformance/specs"
)

// A proxyUnderTest is one proxy make conformance runs upstream's specs
// against, installed as its users install it and removed without a trace
// before the next one.
type proxyUnderTest struct {
	name      string
	install   func(*cluster, context.Context) error
	uninstall func(*cluster, context.Context) error
}

var conformanceProxies = []proxyUnderTest{
	{
		name:    "svcproxy",
		install: (*cluster).ensureSvcproxy,
		uninstall: func(c *cluster, ctx context.Context) error {
			return c.removeProxy(ctx, "svcproxy", svcproxyPods, c.cfg.svcproxy, "--cleanup", "--takeover=false")
		},
	},
	kubeProxyUnderTest("iptables"),
	kubeProxyUnderTest("nftables"),
}

func kubeProxyUnderTest(mode string) proxyUnderTest {
	return proxyUnderTest{
		name: "kube-proxy-" + mode,
		install: func(c *cluster, ctx context.Context) error {
			if err := c.applyKubeProxy(ctx, mode); err != nil {
				return err
			}
			_, err := c.waitDaemonSetReady(ctx, "kube-proxy", kubeProxyPods, 3*time.Minute)
			return err
		},
		uninstall: func(c *cluster, ctx context.Context) error {
			// kube-proxy --cleanup removes what any of its modes left.
			return c.removeProxy(ctx, "kube-proxy", kubeProxyPods, c.k8sBin("kube-proxy"), "--cleanup")
		},
	}
}

// removeProxy deletes the DaemonSet name, waits for its pods (selector) to go, then runs cleanup... in every node's namespace:
// the rules a proxy leaves behind must not serve the next one's run.
func (c *cluster) removeProxy(ctx context.Context, name, selector string, cleanup ...string) error {
	if _, err := c.kubectl(ctx, "-n", "kube-system", "delete", "daemonset", name); err != nil {
		return err
	}
	if err := c.waitGone(ctx, "kube-system", selector, 2*time.Minute); err != nil {
		return err
	}
	for _, n := range c.nodes {
		out, err := netns.Exec(n.netns, cleanup...)
		if err != nil {
			return fmt.Errorf("%s: %s: %w\n%s", n.name, strings.Join(cleanup, " "), err, out)
		}
	}
	return nil
}

// TestConformance runs upstream's e2e binary (CONFORMANCE_E2E_TEST, built by
// hack/build-conformance-bins.sh from k8s.io/kubernetes/test/e2e v1.37.2, with
// the ginkgo CLI beside it) against this cluster once per proxy in
// CONFORMANCE_PROXIES (default all of conformanceProxies, in order), with the
// specs of test/conformance/specs (CONFORMANCE_FOCUS and CONFORMANCE_SKIP
// override them) in CONFORMANCE_PROCS parallel processes (default 4). Each
// proxy's JUnit report and log go to CONFORMANCE_REPORTS/<proxy>/; the test
// fails if e2e.test failed for any proxy. CONFORMANCE_HOLD=path keeps the
// cluster (with the last proxy) up until that file exists.
func TestConformance(t *testing.T) {
	e2eTest := os.Getenv("CONFORMANCE_E2E_TEST")
	if e2eTest == "" {
		t.Skip("CONFORMANCE_E2E_TEST is not set (run make conformance)")
	}
	reports := os.Getenv("CONFORMANCE_REPORTS")
	if reports == "" {
		reports = filepath.Join(theCluster.logDir, "conformance")
	}
	proxies, err := selectProxies(os.Getenv("CONFORMANCE_PROXIES"))
	if err != nil {
		t.Fatal(err)
	}
	c := theCluster
	ctx := context.Background()
	c.saveProxyLogsOnFailure(t)
	var failed []string
	for i, p := range proxies {
		c.logf("conformance: installing %s", p.name)
		if err := p.install(c, ctx); err != nil {
			t.Fatalf("install %s: %v", p.name, err)
		}
		if i == 0 {
			// CoreDNS reaches the API server through the kubernetes Service:
			// once there is a proxy.
			if err := c.applyCoreDNS(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.waitPodsReady(ctx, "kube-system", "k8s-app=kube-dns", 1, 3*time.Minute); err != nil {
			t.Fatalf("CoreDNS with %s: %v", p.name, err)
		}
		if err := c.runE2E(ctx, e2eTest, filepath.Join(reports, p.name)); err != nil {
			t.Errorf("%s: %v", p.name, err)
			failed = append(failed, p.name)
		}
		if i == len(proxies)-1 && os.Getenv("CONFORMANCE_HOLD") != "" {
			c.hold(os.Getenv("CONFORMANCE_HOLD"))
		}
		if err := p.uninstall(c, ctx); err != nil {
			t.Fatalf("uninstall %s: %v", p.name, err)
		}
	}
	if len(failed) > 0 {
		t.Logf("e2e.test failed with %v; each proxy's log and JUnit report are in %s", failed, reports)
	}
}

func selectProxies(names string) ([]proxyUnderTest, error) {
	if names == "" {
		return conformanceProxies, nil
	}
	var out []proxyUnderTest
	for _, name := range strings.Fields(names) {
		found := false
		for _, p := range conformanceProxies {
			if p.name == name {
				out = append(out, p)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("CONFORMANCE_PROXIES: unknown proxy %q", name)
		}
	}
	return out, nil
}

// runE2E runs e2e.test through the ginkgo CLI beside it, from the control
// plane node's namespace (as kind's runner reaches the cluster: the admin
// kubeconfig names https://127.0.0.1:6443), and writes its JUnit report and
// log into dir.
func (c *cluster) runE2E(ctx context.Context, e2eTest, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The first run (an IPv4 cluster) runs the selection but the dual-stack
	// specs; the second (E2ENODE_FAMILY=dual) runs those only, its JUnit
	// file and log named apart so that the report reads both.
	focus, skip, prefix := specs.Focus, specs.SingleStackSkipPattern(), ""
	if c.cfg.dual {
		focus, skip, prefix = specs.DualStackFocus, specs.SkipPattern(), "dualstack"
	}
	if v := os.Getenv("CONFORMANCE_FOCUS"); v != "" {
		focus = v
	}
	if v := os.Getenv("CONFORMANCE_SKIP"); v != "" {
		skip = v
	}
	procs := 4
	if v := os.Getenv("CONFORMANCE_PROCS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("CONFORMANCE_PROCS=%q: want a positive number", v)
		}
		procs = n
	}
	argv := []string{"ip", "netns", "exec", c.cp().netns,
		filepath.Join(filepath.Dir(e2eTest), "ginkgo"),
		"--procs=" + strconv.Itoa(procs), "--no-color", "--timeout=3h", "--poll-progress-after=5m",
		e2eTest, "--",
		"--kubeconfig=" + c.adminKC,
		"--provider=skeleton",
		// Specs that need several nodes skip themselves unless told how many
		// schedulable ones there are ("Requires at least 2 nodes (not -1)").
		"--num-nodes=" + strconv.Itoa(len(c.workers())),
		"--kubectl-path=" + c.nodeBin("kubectl"),
		"--report-dir=" + dir,
		"--report-prefix=" + prefix,
		"--ginkgo.focus=" + focus,
		"--ginkgo.skip=" + skip,
		"--ginkgo.v",
	}
	if extra := os.Getenv("CONFORMANCE_ARGS"); extra != "" {
		argv = append(argv, strings.Fields(extra)...)
	}
	logPath := filepath.Join(dir, "e2e"+prefix+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	// kubectl (the framework's `kubectl exec`) reads $HOME/.kube otherwise.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.adminKC)
	c.logf("running %s", strings.Join(argv, " "))
	start := time.Now()
	runErr := cmd.Run()
	c.logf("e2e.test finished in %v: %v (log %s)\n%s", time.Since(start).Round(time.Second), runErr, logPath, tail(logPath, 40))
	if runErr != nil {
		return fmt.Errorf("e2e.test: %w", runErr)
	}
	return nil
}

// hold keeps the cluster up until path exists, for a look from outside.
func (c *cluster) hold(path string) {
	c.logf("holding the cluster until %s exists (admin kubeconfig %s, cp netns %s, pid %d)", path, c.adminKC, c.cp().netns, os.Getpid())
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(2 * time.Second)
	}
}
