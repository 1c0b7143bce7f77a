//go:build e2enode

package e2enode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/internal/poll"
)

// pauseImage is the sandbox image containerd runs for every pod; the suite
// builds and imports it (test/e2enode/pause): nothing is pulled.
const pauseImage = "docker.io/svcproxy-e2enode/pause:1"

// startInNode starts argv as a process of node n: in its network namespace
// (only: it shares the suite's mount namespace, so that the volumes kubelet
// mounts are the ones containerd hands to runc) and in the pids cgroup
// n.runtime, where teardown finds it and every shim it forks.
func (c *cluster) startInNode(name string, n *node, argv ...string) (*proc, error) {
	script := `echo $$ > "$1" && ns="$2" && shift 2 && exec nsenter --net="$ns" -- "$@"`
	args := append([]string{"sh", "-c", script, "sh", filepath.Join(pidsCgroup(n.runtime), "cgroup.procs"), netns.Path(n.netns)}, argv...)
	return c.start(name, "", args...)
}

func (n *node) sock() string { return filepath.Join(n.dir, "containerd.sock") }

// containerdConfig is Debian's containerd 1.6 with everything of its own
// under the node's directory, cgroupfs (no systemd here), and what the probe
// found this machine needs: restrict_oom_score_adj (the bounding set lacks
// CAP_SYS_RESOURCE, so runc cannot lower oom_score_adj), pod network
// namespaces under the state directory, the suite's pause image.
func (n *node) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[6]q
`, filepath.Join(n.dir, "containerd", "root"), filepath.Join(n.dir, "containerd", "state"), n.sock(),
		filepath.Join(n.dir, "containerd", "opt"), pauseImage, filepath.Join(n.dir, "cni", "net.d"))
}

// cniConfig: Debian's bridge, host-local and portmap plugins, the node's pod
// CIDRs (one range set per family: a pod of a dual-stack cluster gets an
// address of each), hairpin on (a pod reaching itself through its Service), no masquerade
// (pods reach other nodes' pods by routes, as in test/e2e).
func (n *node) cniConfig() string {
	ranges, routes := fmt.Sprintf(`[[{"subnet": %q}]]`, n.podCIDR), `[{"dst": "0.0.0.0/0"}]`
	if n.podCIDR6 != "" {
		ranges = fmt.Sprintf(`[[{"subnet": %q}], [{"subnet": %q}]]`, n.podCIDR, n.podCIDR6)
		routes = `[{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]`
	}
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "e2enode",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": %s,
        "routes": %s,
        "dataDir": %q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, ranges, routes, filepath.Join(n.dir, "cni", "ipam"))
}

func (c *cluster) startRuntimes(ctx context.Context) error {
	for _, n := range c.nodes {
		if err := createCgroup(n.cgroup); err != nil {
			return err
		}
		if err := os.MkdirAll(pidsCgroup(n.runtime), 0o755); err != nil {
			return err
		}
		for _, f := range []struct{ path, body string }{
			{filepath.Join(n.dir, "containerd.toml"), n.containerdConfig()},
			{filepath.Join(n.dir, "cni", "net.d", "10-e2enode.conflist"), n.cniConfig()},
		} {
			if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(f.path, []byte(f.body), 0o644); err != nil {
				return err
			}
		}
		p, err := c.startInNode("containerd-"+n.short, n, "containerd", "--config", filepath.Join(n.dir, "containerd.toml"))
		if err != nil {
			return err
		}
		n.containerd = p
	}
	for _, n := range c.nodes {
		err := poll.UntilOrAbort(ctx, 60*time.Second, 200*time.Millisecond, func() (bool, string, error) {
			if n.containerd.Exited() {
				return false, "", fmt.Errorf("containerd exited:\n%s", tail(filepath.Join(c.logDir, "containerd-"+n.short+".log"), 20))
			}
			out, err := n.ctr(ctx, "version")
			return err == nil, out, nil
		})
		if err != nil {
			return fmt.Errorf("containerd on %s: %w", n.name, err)
		}
	}
	return nil
}

// ctr runs ctr against the node's containerd, in kubelet's namespace k8s.io.
func (n *node) ctr(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ctr", append([]string{"--address", n.sock(), "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// importImages loads every archive of the images directory into every node,
// as `kind load image-archive` does.
func (c *cluster) importImages(ctx context.Context) error {
	archives, err := filepath.Glob(filepath.Join(c.cfg.images, "*.tar"))
	if err != nil || len(archives) == 0 {
		return fmt.Errorf("no image archives in %s: %v", c.cfg.images, err)
	}
	for _, n := range c.nodes {
		for _, a := range archives {
			if _, err := n.ctr(ctx, "images", "import", "--all-platforms", "--digests", "--snapshotter=overlayfs", a); err != nil {
				return err
			}
		}
		out, err := n.ctr(ctx, "images", "ls", "-q")
		if err != nil {
			return err
		}
		c.logf("%s images:\n%s", n.name, strings.TrimSpace(out))
	}
	return nil
}

// kubeletConfig is what kubelet v1.37 needs on this machine: cgroup v1
// allowed (failCgroupV1: false), cgroupfs under the node's own cgroupRoot,
// swap tolerated; its API authenticated by the cluster CA and authorized by
// the API server (so that kubectl logs and exec work as on kind); the cluster
// DNS Service's address when there is one (make conformance); pod logs of its
// own (podLogsDir): the nodes share this machine's /var/log, and each
// kubelet's garbage collector removes the log directories of pods it does not
// run, so a pod's log vanished within a minute when another node's kubelet
// swept /var/log/pods (upstream's Conntrack specs read their client's log);
// eviction thresholds that a busy shared disk does not trip.
func (c *cluster) kubeletConfig(n *node) string {
	clusterDNS := "" // pods get the node's resolv.conf, as the suite's own scenarios use no names
	if c.cfg.clusterDNS != "" {
		clusterDNS = "clusterDNS:\n- " + c.cfg.clusterDNS + "\n"
	}
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %q
cgroupsPerQOS: true
failSwapOn: false
containerRuntimeEndpoint: unix://%s
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %q
authorization:
  mode: Webhook
podCIDR: %s
podLogsDir: %s
clusterDomain: cluster.local
%sresolvConf: /etc/resolv.conf
serializeImagePulls: false
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
protectKernelDefaults: false
`, n.cgroup, n.sock(), n.ip, c.pki.Path("ca.crt"), n.podCIDR, n.podLogsDir(), clusterDNS)
}

// podLogsDir is where node n's kubelet keeps its pods' logs.
func (n *node) podLogsDir() string { return "/var/log/pods-" + n.short }

func (c *cluster) startKubelets(ctx context.Context) error {
	for _, n := range c.nodes {
		cfg := filepath.Join(n.dir, "kubelet.yaml")
		if err := os.WriteFile(cfg, []byte(c.kubeletConfig(n)), 0o644); err != nil {
			return err
		}
		args := []string{
			"--config=" + cfg,
			"--kubeconfig=" + c.pki.Path("kubelet-"+n.short+".kubeconfig"),
			"--root-dir=" + filepath.Join(n.dir, "kubelet"),
			"--cert-dir=" + filepath.Join(n.dir, "kubelet-pki"),
			"--hostname-override=" + n.name,
			"--node-ip=" + strings.Join(n.ips, ","),
			"-v=2",
		}
		if !n.worker {
			// As kind's (kubeadm's) control plane node: only pods that
			// tolerate it, such as the proxies' DaemonSets, run there.
			args = append(args, "--register-with-taints=node-role.kubernetes.io/control-plane:NoSchedule")
		}
		p, err := c.startInNode("kubelet-"+n.short, n, append([]string{c.nodeBin("kubelet")}, args...)...)
		if err != nil {
			return err
		}
		n.kubelet = p
	}
	for _, n := range c.nodes {
		err := poll.UntilOrAbort(ctx, c.cfg.nodeReadyT, 500*time.Millisecond, func() (bool, string, error) {
			if n.kubelet.Exited() {
				return false, "", fmt.Errorf("kubelet exited:\n%s", tail(filepath.Join(c.logDir, "kubelet-"+n.short+".log"), 30))
			}
			node, err := c.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			for _, t := range node.Spec.Taints {
				if t.Key == corev1.TaintNodeNotReady {
					return false, "tainted not-ready", nil
				}
			}
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					return cond.Status == corev1.ConditionTrue, cond.Message, nil
				}
			}
			return false, "no Ready condition", nil
		})
		if err != nil {
			return errors.Join(fmt.Errorf("node %s Ready: %w", n.name, err),
				errors.New(tail(filepath.Join(c.logDir, "kubelet-"+n.short+".log"), 30)))
		}
		if !n.worker {
			// The NodeRestriction admission plugin lets no kubelet set a
			// node-role label on itself: kubeadm labels the node, as here.
			if _, err := c.kubectl(ctx, "label", "node", n.name, "node-role.kubernetes.io/control-plane="); err != nil {
				return err
			}
		}
	}
	return nil
}
