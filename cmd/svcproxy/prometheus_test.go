package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/internal/promtest"
)

// TestPrometheusScrapesMetrics runs a real Prometheus next to svcproxy in a node
// namespace and checks, through Prometheus' query API, that it scrapes svcproxy's
// metrics endpoint and that the kube-proxy sync metrics are there and sane.
func TestPrometheusScrapesMetrics(t *testing.T) {
	netnstest.RequireRoot(t)
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("needs the prometheus binary (Debian: apt-get install -y prometheus)")
	}
	svcproxyBin(t)
	node := netnstest.New(t, "prom")
	tmp := t.TempDir()
	logPath := filepath.Join(tmp, "svcproxy.log")
	promLog := filepath.Join(tmp, "prometheus.log")
	dumpLogOnFailure(t, "svcproxy", logPath)
	dumpLogOnFailure(t, "prometheus", promLog)

	addrs := freeLoopbackAddrs(t, node, 3)
	metrics, healthz, promAddr := addrs[0], addrs[1], addrs[2]
	startSvcproxy(t, node, logPath, "--manifests", seedManifests(t),
		"--metrics-bind-address", metrics, "--healthz-bind-address", healthz)

	config := promtest.Config("svcproxy", []string{metrics})
	configPath := filepath.Join(tmp, "prometheus.yml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	startProcess(t, node, promLog, promBin, "--config.file="+configPath,
		"--storage.tsdb.path="+filepath.Join(tmp, "tsdb"), "--web.listen-address="+promAddr, "--log.level=warn")

	client := node.HTTPClient(2 * time.Second)
	query := func(q string) (labels map[string]string, value float64, err error) {
		samples, err := promtest.Query(client, promAddr, q)
		if err != nil {
			return nil, 0, err
		}
		if len(samples) != 1 {
			return nil, 0, fmt.Errorf("%s: %d samples, want 1: %v", q, len(samples), samples)
		}
		return samples[0].Labels, samples[0].Value, nil
	}

	queries := []string{
		`up{job="svcproxy"}`,
		`kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"}`, // one series per family on a dual-stack node
		`kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"}`,
	}
	got := map[string]float64{}
	var upLabels map[string]string
	poll.Eventually(t, 30*time.Second, "Prometheus to return samples of "+fmt.Sprint(queries), poll.NoError(func() error {
		for _, q := range queries {
			labels, v, err := query(q)
			if err != nil {
				return err
			}
			got[q] = v
			if q == queries[0] {
				upLabels = labels
			}
		}
		return nil
	}))
	t.Logf("Prometheus says %v", got)

	if up := got[queries[0]]; up != 1 {
		t.Errorf("up = %v, want 1 (the scrape of %s fails)", up, metrics)
	}
	if upLabels["instance"] != metrics {
		t.Errorf("up labels %v, want instance %s", upLabels, metrics)
	}
	last := time.Unix(0, int64(got[queries[1]]*1e9))
	if age := time.Since(last); age < -5*time.Second || age > time.Minute {
		t.Errorf("last sync timestamp %v is %v old, want within the last minute", last, age)
	}
	if n := got[queries[2]]; n < 1 || n != float64(int64(n)) {
		t.Errorf("sync duration count = %v, want a whole number >= 1", n)
	}
}

// freeLoopbackAddrs returns n addresses 127.0.0.1:PORT, distinct, with ports that
// were free in ns a moment ago. The listeners stay open until all n are chosen:
// one at a time, the kernel handed the port it had just given back a second
// time (the metrics and healthz servers then fought over it; CI, 2026-12-07).
func freeLoopbackAddrs(t *testing.T, ns *netnstest.NS, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		l, err := ns.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		addrs[i] = l.Addr().(*net.TCPAddr).String()
	}
	return addrs
}

// startProcess runs a command in ns with its output in logPath, and kills it when the
// test ends.
func startProcess(t *testing.T, ns *netnstest.NS, logPath string, args ...string) {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := ns.Command(args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", args[0], err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}
