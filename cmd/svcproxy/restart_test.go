package main

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/pkg/nft"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

const (
	clusterIP   = "10.96.0.10:80"
	metricsAddr = "127.0.0.1:10249" // the node namespace is fresh, so these are free
	healthzAddr = "127.0.0.1:10256"
)

// seedWorld is a node with a client pod and the seed example's two backends
// (10.244.1.2 and 10.244.1.3) running echo servers.
func seedWorld(t *testing.T) (*netnstest.World, *netnstest.NS) {
	t.Helper()
	w := netnstest.NewWorld(t)
	client := w.AddPod("client", "10.244.2.9")
	netnstest.StartEcho(t, w.AddPod("pod1", "10.244.1.2"), "pod1")
	netnstest.StartEcho(t, w.AddPod("pod2", "10.244.1.3"), "pod2")
	return w, client
}

func listTable(t *testing.T, ns *netnstest.NS, handles bool) string {
	t.Helper()
	args := []string{"nft", "list", "table", "ip", proxy.TableName}
	if handles {
		args = []string{"nft", "-a", "list", "table", "ip", proxy.TableName}
	}
	return ns.MustRun(t, args...)
}

// TestRestartKeepsTrafficFlowing kills svcproxy with SIGKILL while a client opens 20
// connections a second to the ClusterIP, starts it again, and checks that not one
// connection failed, and that the restarted process adopted the table as it was.
func TestRestartKeepsTrafficFlowing(t *testing.T) {
	netnstest.RequireRoot(t)
	svcproxyBin(t) // build before the clock starts
	w, client := seedWorld(t)
	dir := seedManifests(t)
	logPath := filepath.Join(t.TempDir(), "svcproxy.log")
	dumpLogOnFailure(t, "svcproxy", logPath)
	args := []string{"--manifests", dir, "--metrics-bind-address", metricsAddr, "--healthz-bind-address", healthzAddr}

	first := startSvcproxy(t, w.Node, logPath, args...)
	poll.Eventually(t, 10*time.Second, "the ClusterIP to answer", poll.NoError(func() error {
		_, err := client.Get(clusterIP, 300*time.Millisecond)
		return err
	}))
	waitSynced(t, w.Node, healthzAddr)
	before := nft.NormalizeListing(listTable(t, w.Node, false))
	beforeHandles := listTable(t, w.Node, true)
	if !strings.Contains(before, ": 10.244.1.2 . 80") || !strings.Contains(before, ": 10.244.1.3 . 80") {
		t.Fatalf("table before the restart lacks the seed endpoints:\n%s", before)
	}

	const (
		rate     = 20
		duration = 4 * time.Second
		killAt   = time.Second
	)
	var (
		mu            sync.Mutex
		answers       = map[string]int{}
		afterRestart  = map[string]int{}
		failures      []string
		wg            sync.WaitGroup
		restarted     bool
		second        *daemon
		restartedWhen time.Duration
	)
	start := time.Now()
	tick := time.NewTicker(time.Second / rate)
	defer tick.Stop()
	for n := 0; n < int(duration/(time.Second/rate)); n++ {
		<-tick.C
		if !restarted && time.Since(start) >= killAt {
			first.kill()
			if first.cmd.ProcessState == nil || first.cmd.ProcessState.Exited() {
				t.Fatalf("svcproxy was not killed by a signal: %v", first.cmd.ProcessState)
			}
			second = startSvcproxy(t, w.Node, logPath, args...)
			mu.Lock()
			restarted, restartedWhen = true, time.Since(start)
			mu.Unlock()
		}
		mu.Lock()
		phaseAfter := restarted
		mu.Unlock()
		wg.Add(1)
		go func(n int, phaseAfter bool) {
			defer wg.Done()
			t0 := time.Now()
			body, err := client.Get(clusterIP, time.Second)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures = append(failures, fmt.Sprintf("request %d at %v: %v", n, t0.Sub(start).Round(time.Millisecond), err))
				return
			}
			answers[body]++
			if phaseAfter {
				afterRestart[body]++
			}
		}(n, phaseAfter)
	}
	wg.Wait()
	t.Logf("restarted at %v; answers %v (after the restart %v)", restartedWhen.Round(time.Millisecond), answers, afterRestart)

	total := 0
	for _, c := range answers {
		total += c
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed across the restart:\n%s", len(failures), total+len(failures), strings.Join(failures, "\n"))
	}
	if total < int(duration/(time.Second/rate))*9/10 {
		t.Errorf("only %d requests answered", total)
	}
	for _, m := range []map[string]int{answers, afterRestart} {
		if m["pod1"] == 0 || m["pod2"] == 0 || len(m) != 2 {
			t.Errorf("answers %v: want both pod1 and pod2 and nothing else", m)
		}
	}
	select {
	case <-second.done:
		t.Fatalf("restarted svcproxy exited: %v", second.err)
	default:
	}

	waitSynced(t, w.Node, healthzAddr)
	if after := nft.NormalizeListing(listTable(t, w.Node, false)); after != before {
		t.Errorf("table changed across the restart\n--- before\n%s\n--- after\n%s", before, after)
	}
	// Adoption means no rewrite: every object keeps its kernel handle.
	if afterHandles := listTable(t, w.Node, true); afterHandles != beforeHandles {
		t.Errorf("restart rewrote the table (handles differ)\n--- before\n%s\n--- after\n%s", beforeHandles, afterHandles)
	}
}

// TestCleanup checks that --cleanup deletes svcproxy's table, and only it, exits 0,
// and is idempotent; and that a SIGTERM'd daemon exits 0 and leaves the table for
// its successor.
func TestCleanup(t *testing.T) {
	netnstest.RequireRoot(t)
	svcproxyBin(t)
	node := netnstest.New(t, "node")
	node.MustRun(t, "nft", "add", "table", "ip", "bystander")
	logPath := filepath.Join(t.TempDir(), "svcproxy.log")
	dumpLogOnFailure(t, "svcproxy", logPath)

	d := startSvcproxy(t, node, logPath, "--manifests", seedManifests(t),
		"--metrics-bind-address", metricsAddr, "--healthz-bind-address", healthzAddr)
	waitSynced(t, node, healthzAddr)
	if code := d.stop(t); code != 0 {
		t.Fatalf("svcproxy exited %d on SIGTERM, want 0", code)
	}
	if out := node.MustRun(t, "nft", "list", "tables"); !strings.Contains(out, "table ip "+proxy.TableName+"\n") {
		t.Fatalf("table gone after SIGTERM (a restart would interrupt traffic): %q", out)
	}

	for _, tc := range []struct{ name string }{{"with the table"}, {"again, nothing left"}} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := node.Run(svcproxyBin(t), "--cleanup")
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("--cleanup exited %d: %s", ee.ExitCode(), out)
			} else if err != nil {
				t.Fatalf("--cleanup: %v: %s", err, out)
			}
			tables := node.MustRun(t, "nft", "list", "tables")
			lines := strings.Split(strings.TrimSpace(tables), "\n")
			sort.Strings(lines)
			if want := []string{"table ip bystander"}; strings.Join(lines, "|") != strings.Join(want, "|") {
				t.Fatalf("tables after --cleanup: %q, want %q", lines, want)
			}
		})
	}
}
