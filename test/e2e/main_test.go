//go:build e2e

// Package e2e runs svcproxy (or upstream kube-proxy, the reference) in a
// kind-like cluster made of network namespaces and the real Kubernetes
// control plane, and checks Services with real traffic. Run it through
// hack/e2e.sh, which installs and builds what it needs; see docs/e2e.md.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"
)

type config struct {
	bins        string // directory with etcd, kube-apiserver, ...
	proxy       string // svcproxy | kube-proxy-iptables | kube-proxy-nftables
	family      family // E2E_FAMILY: ipv4 | dual | ipv6
	svcproxyBin string
	agentBin    string
	prefix      string // optional namespace name prefix
	results     string // optional JSON results file
	// bench (E2E_BENCH=1, hack/bench.sh): only the control plane and the Nodes;
	// TestBenchSideBySide starts the proxies it compares in namespaces of its own,
	// TestBenchFleet (E2E_FLEET=1) its simulated ones in process.
	bench bool
}

var proxies = map[string]bool{"svcproxy": true, "kube-proxy-iptables": true, "kube-proxy-nftables": true}

// theCluster is shared by all tests of one run.
var theCluster *cluster

func TestMain(m *testing.M) { os.Exit(mainRun(m)) }

func mainRun(m *testing.M) int {
	cfg := config{
		bins:        os.Getenv("E2E_K8S_BINS"),
		proxy:       os.Getenv("PROXY"),
		svcproxyBin: os.Getenv("E2E_SVCPROXY_BIN"),
		agentBin:    os.Getenv("E2E_NODEAGENT_BIN"),
		prefix:      os.Getenv("E2E_PREFIX"),
		results:     os.Getenv("E2E_RESULTS"),
		bench:       os.Getenv("E2E_BENCH") != "" || os.Getenv("E2E_FLEET") != "",
	}
	if cfg.proxy == "" {
		cfg.proxy = "svcproxy"
	}
	var err error
	if cfg.family, err = parseFamily(os.Getenv("E2E_FAMILY")); err != nil {
		fmt.Println("e2e:", err)
		return 1
	}
	useFamily(cfg.family)
	limitToFamilyScenarios(cfg.family)
	if cfg.bins == "" || (cfg.agentBin == "" && !cfg.bench) {
		fmt.Println("e2e: E2E_K8S_BINS or E2E_NODEAGENT_BIN not set; run hack/e2e.sh")
		return 1
	}
	if !proxies[cfg.proxy] {
		fmt.Printf("e2e: PROXY=%q: want svcproxy, kube-proxy-iptables or kube-proxy-nftables\n", cfg.proxy)
		return 1
	}
	if cfg.proxy == "svcproxy" && cfg.svcproxyBin == "" {
		fmt.Println("e2e: E2E_SVCPROXY_BIN not set")
		return 1
	}
	if os.Geteuid() != 0 {
		fmt.Println("e2e: must run as root (network namespaces)")
		return 1
	}
	cleanupStale()

	c, err := newCluster(cfg)
	if err != nil {
		fmt.Println("e2e:", err)
		return 1
	}
	theCluster = c
	c.logf("run %s, proxy %s, family %s, work dir %s", c.prefix, c.proxyKind, c.family, c.dir)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sigs
		c.logf("%v: tearing down", s)
		c.teardown()
		os.Exit(130)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	err = c.up(ctx)
	if err == nil && !cfg.bench {
		err = c.createClients(ctx)
	}
	cancel()
	code := 1
	if err != nil {
		c.logf("cluster up failed: %v", err)
		results = append(results, &result{Test: "ClusterUp", Status: "fail", Proxy: cfg.proxy,
			Metrics: map[string]string{"error": err.Error()}, Finished: time.Now()})
	} else {
		code = m.Run()
	}
	c.teardown()
	writeResults(cfg)
	printSummary()
	if code != 0 {
		c.dumpLogs()
		c.logf("logs kept in %s", c.logDir)
	} else if os.Getenv("E2E_KEEP") == "" {
		_ = os.RemoveAll(c.dir)
	}
	return code
}

// dumpLogs prints the tail of every log file.
func (c *cluster) dumpLogs() {
	files, _ := filepath.Glob(filepath.Join(c.logDir, "*.log"))
	for _, f := range files {
		fmt.Fprintf(os.Stderr, "----- %s (tail)\n%s\n", filepath.Base(f), tail(f, 25))
	}
}

// result is one scenario's outcome for the matrix.
type result struct {
	Test     string            `json:"test"`
	Status   string            `json:"status"`
	Seconds  float64           `json:"seconds"`
	Metrics  map[string]string `json:"metrics,omitempty"`
	Proxy    string            `json:"proxy"`
	Finished time.Time         `json:"finished"`
}

var (
	resultsMu sync.Mutex
	results   []*result
)

// track records t's outcome and returns a place for its numbers.
func track(t *testing.T) *result {
	r := &result{Test: t.Name(), Metrics: map[string]string{}, Proxy: theCluster.proxyKind}
	start := time.Now()
	t.Cleanup(func() {
		r.Seconds = time.Since(start).Seconds()
		r.Finished = time.Now()
		switch {
		case t.Failed():
			r.Status = "fail"
		case t.Skipped():
			r.Status = "skip"
		default:
			r.Status = "pass"
		}
		resultsMu.Lock()
		results = append(results, r)
		resultsMu.Unlock()
	})
	return r
}

func (r *result) metric(t *testing.T, key, format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	resultsMu.Lock()
	r.Metrics[key] = v
	resultsMu.Unlock()
	t.Logf("METRIC %s=%s", key, v)
}

func writeResults(cfg config) {
	if cfg.results == "" {
		return
	}
	resultsMu.Lock()
	defer resultsMu.Unlock()
	sort.Slice(results, func(i, j int) bool { return results[i].Finished.Before(results[j].Finished) })
	out := struct {
		Proxy   string    `json:"proxy"`
		Results []*result `json:"results"`
	}{cfg.proxy, results}
	b, _ := json.MarshalIndent(out, "", "  ")
	if err := os.WriteFile(cfg.results, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: write results:", err)
	}
}

// TestHold keeps the cluster up for E2E_HOLD (a duration) so that a person can
// look at it; skipped otherwise. Delete /tmp/<prefix>hold to end it early.
func TestHold(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("E2E_HOLD"))
	if err != nil {
		t.Skip("E2E_HOLD not set")
	}
	c := theCluster
	hold := filepath.Join(os.TempDir(), c.prefix+"hold")
	_ = os.WriteFile(hold, nil, 0o644)
	t.Logf("holding for %v: admin kubeconfig %s (dial from netns %s); rm %s to stop", d, c.adminKC, c.cp().netns, hold)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(hold); err != nil {
			return
		}
		time.Sleep(time.Second)
	}
	_ = os.Remove(hold)
}

// printSummary prints the plain closing line that CI reads.
func printSummary() {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	n := map[string]int{}
	for _, r := range results {
		n[r.Status]++
	}
	fmt.Printf("e2e: %d passed, %d failed, %d skipped\n", n["pass"], n["fail"], n["skip"])
}
