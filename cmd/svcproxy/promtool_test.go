package main

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/poll"
)

// promtoolAccepted are the lint findings that kube-proxy's own /metrics has too:
// the name is kube-proxy's (a gauge, pkg/proxy/metrics/metrics.go
// SyncProxyRulesNoLocalEndpointsTotal), and dashboards use it as it is.
var promtoolAccepted = []string{
	`kubeproxy_sync_proxy_rules_no_local_endpoints_total non-counter metrics should not have "_total" suffix`,
}

// TestPromtoolChecksMetrics runs `promtool check metrics` on what a running
// svcproxy serves on /metrics: it must parse, and lint clean but for the findings
// kube-proxy's output shares (promtool exits 3 for lint findings, 1 for errors).
func TestPromtoolChecksMetrics(t *testing.T) {
	netnstest.RequireRoot(t)
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("needs promtool (Debian: apt-get install -y prometheus; hack/deps.sh installs it)")
	}
	svcproxyBin(t)
	node := netnstest.New(t, "promtool")
	logPath := filepath.Join(t.TempDir(), "svcproxy.log")
	dumpLogOnFailure(t, "svcproxy", logPath)
	addrs := freeLoopbackAddrs(t, node, 2)
	metrics := addrs[0]
	startSvcproxy(t, node, logPath, "--manifests", seedManifests(t),
		"--metrics-bind-address", metrics, "--healthz-bind-address", addrs[1])

	client := node.HTTPClient(2 * time.Second)
	var body []byte
	poll.Eventually(t, 30*time.Second, "a /metrics page after the first sync", poll.NoError(func() error {
		resp, err := client.Get("http://" + metrics + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if body, err = io.ReadAll(resp.Body); err != nil {
			return err
		}
		if !bytes.Contains(body, []byte("kubeproxy_sync_proxy_rules_duration_seconds_count")) {
			return errors.New("no sync yet")
		}
		return nil
	}))

	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var unexpected []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && !slices.Contains(promtoolAccepted, l) {
			unexpected = append(unexpected, l)
		}
	}
	if (code != 0 && code != 3) || len(unexpected) > 0 {
		t.Fatalf("promtool check metrics: exit %d, findings:\n%s\n(metrics page: %d bytes)", code, strings.Join(unexpected, "\n"), len(body))
	}
	t.Logf("promtool check metrics: exit %d on %d bytes, findings %q (kube-proxy's too)", code, len(body), out)
}
