package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/deploy"
	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/pkg/config"
)

func TestMain(m *testing.M) {
	netnstest.ServeEchoIfAsked()
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// svcproxyBin builds the real binary once per test run and returns its path.
func svcproxyBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("no go tool in PATH: %w", err)
			return
		}
		if binDir, buildErr = os.MkdirTemp("", "svcproxy-bin"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "svcproxy")
		out, err := exec.Command(goTool, "build", "-o", binPath, "github.com/svcproxy/svcproxy/cmd/svcproxy").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// seedManifests writes the embedded seed example (Service my-nginx, 10.96.0.10:80,
// endpoints 10.244.1.2 and 10.244.1.3) to a fresh directory.
func seedManifests(t *testing.T) string {
	t.Helper()
	data, err := deploy.Examples.ReadFile("examples/my-nginx.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "my-nginx.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// daemon is an svcproxy process running in a namespace.
type daemon struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // of Wait, valid once done is closed
}

// startSvcproxy runs the built binary with args inside ns. Its output is appended to
// logPath, which is printed if the test fails; the process is killed at the end.
func startSvcproxy(t *testing.T, ns *netnstest.NS, logPath string, args ...string) *daemon {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := ns.Command(append([]string{svcproxyBin(t)}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start svcproxy: %v", err)
	}
	d := &daemon{cmd: cmd, done: make(chan struct{})}
	go func() { d.err = cmd.Wait(); close(d.done) }()
	t.Cleanup(func() { d.kill() })
	return d
}

// kill sends SIGKILL (`ip netns exec` execs in place, so the pid is svcproxy's) and
// waits for the process to be gone.
func (d *daemon) kill() {
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
}

// stop sends SIGTERM and returns the exit code.
func (d *daemon) stop(t *testing.T) int {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		t.Fatal("svcproxy did not exit within 10s of SIGTERM")
	}
	return d.cmd.ProcessState.ExitCode()
}

// dumpLogOnFailure prints a log file if the test failed.
func dumpLogOnFailure(t *testing.T, what, path string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		b, _ := os.ReadFile(path)
		t.Logf("--- %s log (%s)\n%s", what, path, b)
	})
}

// healthz GETs /healthz from inside ns and returns the status code and lastUpdated.
func healthz(ns *netnstest.NS, addr string) (int, string, error) {
	resp, err := ns.HTTPClient(time.Second).Get("http://" + addr + "/healthz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", err
	}
	var body struct {
		LastUpdated string `json:"lastUpdated"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return resp.StatusCode, "", fmt.Errorf("healthz body %q: %w", b, err)
	}
	return resp.StatusCode, body.LastUpdated, nil
}

// waitSynced waits until /healthz answers 200 and the process has completed a
// sync (kubeproxy_sync_proxy_rules_last_timestamp_seconds, on metricsAddr, is set):
// like kube-proxy's, /healthz is 200 from the start, before the first sync.
func waitSynced(t *testing.T, ns *netnstest.NS, addr string) {
	t.Helper()
	poll.Eventually(t, 10*time.Second, "/healthz 200 after a sync", poll.NoError(func() error {
		code, _, err := healthz(ns, addr)
		switch {
		case err != nil:
			return err
		case code != 200:
			return fmt.Errorf("status %d", code)
		}
		resp, err := ns.HTTPClient(time.Second).Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		const synced = `kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} `
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, synced); ok && v != "0" {
				return nil
			}
		}
		return errors.New("not synced yet")
	}))
}

// TestConfigChangeEndsTheProcess: the real binary, in a node namespace, exits
// non-zero when its --config file changes, as kube-proxy does, so that kubelet
// restarts it with the new configuration.
func TestConfigChangeEndsTheProcess(t *testing.T) {
	node := netnstest.New(t, "cfgwatch")
	dir := t.TempDir()
	file := filepath.Join(dir, "config.conf")
	rewrite := func(body string) {
		if err := os.WriteFile(file, []byte(configHeader+body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rewrite("mode: nftables\n")
	logPath := filepath.Join(dir, "svcproxy.log")
	dumpLogOnFailure(t, "svcproxy", logPath)
	d := startSvcproxy(t, node, logPath, "--config", file, "--manifests", seedManifests(t))
	time.Sleep(500 * time.Millisecond)
	select {
	case <-d.done:
		t.Fatalf("svcproxy exited before the change: %v", d.err)
	default:
	}
	rewrite("mode: iptables\n")
	select {
	case <-d.done:
		if code := d.cmd.ProcessState.ExitCode(); code != 1 {
			t.Errorf("exit code %d, want 1", code)
		}
		log, _ := os.ReadFile(logPath)
		if !strings.Contains(string(log), config.ErrChanged.Error()) {
			t.Errorf("the log does not say why:\n%s", log)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("svcproxy still runs 10s after its configuration changed")
	}
}
