package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCtrImport loads the archive the way `kind load image-archive` does on a
// node (`ctr -n k8s.io images import --all-platforms --digests
// --snapshotter=overlayfs`), into a containerd of its own: its own root,
// state and socket under a temporary directory, in a private mount namespace
// so that the snapshots it mounts never appear in the host's. Then it runs
// the image with runc and the entrypoint answers.
func TestCtrImport(t *testing.T) {
	if testing.Short() {
		t.Skip("builds svcproxy")
	}
	if os.Getuid() != 0 {
		t.Skip("containerd needs root")
	}
	for _, tool := range []string{"containerd", "ctr", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (apt-get install containerd; hack/deps.sh installs it)", tool)
		}
	}
	t.Chdir("../..")
	dir := t.TempDir()
	archive := filepath.Join(dir, "image.tar")
	if err := build(archive, "svcproxy:ctrtest", "", false); err != nil {
		t.Fatal(err)
	}
	sock := startContainerd(t, dir)
	ctr := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "ctr", append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("ctr %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	if _, err := ctr("images", "import", "--all-platforms", "--digests", "--snapshotter=overlayfs", archive); err != nil {
		t.Fatal(err)
	}
	list, err := ctr("images", "ls", "-q")
	if err != nil {
		t.Fatal(err)
	}
	// kubelet asks for image svcproxy:ctrtest as docker.io/library/svcproxy:ctrtest.
	const want = "docker.io/library/svcproxy:ctrtest"
	if !strings.Contains(list, want+"\n") {
		t.Fatalf("containerd holds\n%s\nwant %s", list, want)
	}
	// A cgroup of one level, which runc removes with the container (ctr's
	// default, /k8s.io/ID, would leave /k8s.io behind in every hierarchy).
	cgroup := fmt.Sprintf("/svcproxy-ctrtest-%d", os.Getpid())
	out, err := ctr("run", "--rm", "--snapshotter=overlayfs", "--cgroup", cgroup, want, "ctrtest", "/svcproxy", "render")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "table ip svcproxy") {
		t.Errorf("/svcproxy render in the container:\n%s", out)
	}
}

// startContainerd runs containerd with everything under dir and returns its
// socket; it is stopped with the test.
func startContainerd(t *testing.T, dir string) string {
	t.Helper()
	sock := filepath.Join(dir, "containerd.sock")
	cfg := filepath.Join(dir, "config.toml")
	// Only what import and run need: no CRI, no metrics or debug listeners.
	toml := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[debug]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, filepath.Join(dir, "debug.sock"))
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--mount", "--propagation=private", "--", "containerd", "--config", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("containerd log:\n%s", b)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := exec.Command("ctr", "--address", sock, "version").Run(); err == nil {
			return sock
		}
		select {
		case <-done:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("containerd exited:\n%s", b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("containerd did not answer within 30 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
