//go:build e2enode

// Package e2enode is the node suite (`make e2e-node`): the control plane of
// test/e2e plus, on each worker, a real kubelet and containerd with the
// standard CNI plugins, so that svcproxy runs as what users run: its
// DaemonSet's pod from its image, applied with `kubectl apply -k`.
// hack/e2e-node.sh builds what it needs and runs it inside a private mount
// namespace. Scenarios run in file order on one cluster: TestDaemonSetApply
// (scenarios_test.go) needs a cluster with no proxy, so the files of scenarios
// that install svcproxy sort after it (svcproxy_*_test.go).
package e2enode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var theCluster *cluster

func env(key string) string {
	v := os.Getenv(key)
	if v == "" {
		fmt.Fprintf(os.Stderr, "e2enode: %s is not set (run make e2e-node)\n", key)
		os.Exit(2)
	}
	return v
}

func TestMain(m *testing.M) {
	if os.Getuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2enode: skipped: needs root (network namespaces, cgroups, containerd)")
		os.Exit(0)
	}
	cfg := config{
		prefix:     env("E2ENODE_PREFIX"),
		k8sBins:    env("E2ENODE_K8S_BINS"),
		nodeBins:   env("E2ENODE_NODE_BINS"),
		images:     env("E2ENODE_IMAGES"),
		svcproxy:   env("E2ENODE_SVCPROXY_BIN"),
		repo:       env("E2ENODE_REPO"),
		keep:       os.Getenv("E2ENODE_KEEP") != "",
		nodeReadyT: 3 * time.Minute,
		workers:    2,
		clusterDNS: os.Getenv("E2ENODE_CLUSTER_DNS"),
	}
	switch f := os.Getenv("E2ENODE_FAMILY"); f {
	case "", "ipv4":
	case "dual":
		cfg.dual = true
	default:
		fmt.Fprintf(os.Stderr, "e2enode: E2ENODE_FAMILY=%q: want ipv4 or dual\n", f)
		os.Exit(2)
	}
	if w := os.Getenv("E2ENODE_WORKERS"); w != "" {
		n, err := strconv.Atoi(w)
		if err != nil || n < 2 {
			fmt.Fprintf(os.Stderr, "e2enode: E2ENODE_WORKERS=%q: want a number of at least 2\n", w)
			os.Exit(2)
		}
		cfg.workers = n
	}
	c, err := newCluster(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2enode:", err)
		os.Exit(1)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	err = c.up(ctx)
	cancel()
	code := 1
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2enode: cluster: %v\n", err)
		c.dumpLogs()
	} else {
		c.logf("cluster up in %v", time.Since(start).Round(time.Millisecond))
		theCluster = c
		code = m.Run()
		if code != 0 {
			c.dumpLogs()
		}
	}
	c.teardown()
	if code == 0 && !cfg.keep {
		if err := os.RemoveAll(c.dir); err != nil {
			fmt.Fprintf(os.Stderr, "e2enode: %v\n", err)
		}
	} else {
		fmt.Fprintf(os.Stderr, "e2enode: logs kept in %s\n", c.logDir)
	}
	if err != nil {
		// Last, so that the tail CI keeps says why.
		first, _, _ := strings.Cut(err.Error(), "\n")
		fmt.Fprintf(os.Stderr, "e2enode: the cluster did not come up: %s\n", first)
	}
	os.Exit(code)
}

// dumpLogs prints the tail of every process's log.
func (c *cluster) dumpLogs() {
	logs, _ := filepath.Glob(filepath.Join(c.logDir, "*.log"))
	for _, l := range logs {
		fmt.Fprintf(os.Stderr, "----- %s\n%s\n", filepath.Base(l), tail(l, 25))
	}
}
