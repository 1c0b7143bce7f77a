//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcproxy/svcproxy/internal/install"
	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/internal/poll"
)

// The node of the pod contract scenario: no proxy but the one under test,
// outside c.nodes so that no other scenario starts a proxy or pods there.
const (
	contractNode  = "svcproxy-podcontract"
	contractShort = "pc"
	contractIP    = "172.18.0.9"
	contractIP6   = "fd00:172:18::9"
	// Where kubelet mounts the ServiceAccount's token and CA in every pod.
	saMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// Scenario 15: svcproxy starts and serves exactly as its DaemonSet's pod
// would on a node of a cluster without kube-proxy: the manifests rendered from
// deploy/kind/ (with the test cluster's API server address merged in the way
// that overlay sets kind's), the RBAC applied, a token minted for the
// ServiceAccount at the in-pod path, kubelet's environment (KUBERNETES_SERVICE_HOST
// = the kubernetes Service's ClusterIP, which nothing routes here until
// svcproxy runs), only the capabilities the manifest grants, and the binary
// taken out of the image `make image` built.
func TestPodContract(t *testing.T) {
	res := track(t)
	c := theCluster
	if c.proxyKind != "svcproxy" {
		t.Skip("the pod contract is svcproxy's DaemonSet; PROXY=" + c.proxyKind)
	}
	imageTar := os.Getenv("E2E_IMAGE_TAR")
	if imageTar == "" {
		t.Fatal("E2E_IMAGE_TAR not set: run hack/e2e.sh, which builds the image")
	}
	ctx := ctxFor(t, 4*time.Minute)
	work := filepath.Join(c.dir, "podcontract")
	if err := os.MkdirAll(filepath.Join(work, "serviceaccount"), 0o755); err != nil {
		t.Fatal(err)
	}

	in := renderForTestCluster(t, work)
	ds, err := in.DaemonSet()
	if err != nil {
		t.Fatal(err)
	}
	applyInstall(t, ctx, in)

	n := addContractNode(t, ctx)
	// The premise: before svcproxy runs, the kubernetes Service is unreachable
	// from this node, as on a kind cluster with kubeProxyMode none.
	if err := (&podClient{name: contractNode, netns: n.netns}).dialTCP(net.JoinHostPort(kubernetesIP, "443"), time.Second); err == nil {
		t.Fatalf("%s:443 answers from %s before any proxy runs there", kubernetesIP, contractNode)
	} else {
		t.Logf("before svcproxy: %s:443 from %s: %v", kubernetesIP, contractNode, err)
	}

	// The ServiceAccount's credentials at the in-pod paths, as kubelet
	// projects them: a bound token from the TokenRequest API, the cluster CA,
	// the namespace.
	pod := ds.Spec.Template
	sa := pod.Spec.ServiceAccountName
	tr, err := c.client.CoreV1().ServiceAccounts(ds.Namespace).CreateToken(ctx, sa,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ref(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for ServiceAccount %s/%s: %v", ds.Namespace, sa, err)
	}
	for file, data := range map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": c.pki.caPEM, "namespace": []byte(ds.Namespace)} {
		if err := os.WriteFile(filepath.Join(work, "serviceaccount", file), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The process the image and the pod spec make, with the binary taken out
	// of the archive make image wrote.
	image := pod.Spec.Containers[0].Image
	def, err := imageConfig(imageTar, image)
	if err != nil {
		t.Fatalf("the DaemonSet's image: %v", err)
	}
	ctr, err := resolveContainer(ctx, c.client, &pod, ds.Namespace, contractNode, def)
	if err != nil {
		t.Fatal(err)
	}
	binary := filepath.Join(work, "rootfs-"+filepath.Base(ctr.argv[0]))
	if err := imageFile(imageTar, image, ctr.argv[0], binary); err != nil {
		t.Fatalf("the DaemonSet's image: %v", err)
	}
	t.Logf("pod contract: uid %d gid %d caps %v no_new_privs %v\n  argv %q\n  env %q", ctr.uid, ctr.gid, ctr.caps, ctr.nnp, ctr.argv, ctr.env)
	root := filepath.Join(work, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	argv := contractCommand(t, ctr, binary, filepath.Join(work, "serviceaccount"), root)
	start := time.Now()
	p, err := c.start("proxy-"+contractShort, n.netns, argv...)
	if err != nil {
		t.Fatal(err)
	}
	n.proxy = p
	t.Cleanup(func() { p.stop(3 * time.Second) })
	logPath := filepath.Join(c.logDir, p.Name+".log")

	if err := c.waitProxyHealthy(ctx, n, 60*time.Second); err != nil {
		t.Fatalf("svcproxy as its pod never became healthy: %v\n%s", err, tail(logPath, 30))
	}
	checkContractProcess(t, p.pid(), ctr)
	// The sysctls it writes reach the node through the DaemonSet's hostPath
	// mount (--sysctl-dir): the established timeout is kube-proxy's default
	// (24h) rather than a new network namespace's 5 days.
	if got, err := netns.Exec(n.netns, "sysctl", "-n", "net.netfilter.nf_conntrack_tcp_timeout_established"); err != nil || strings.TrimSpace(got) != "86400" {
		t.Errorf("nf_conntrack_tcp_timeout_established on %s = %q (%v), want svcproxy's 86400", contractNode, got, err)
	}
	res.metric(t, "healthy_after_ms", "%s", ms(time.Since(start)))

	// It serves a Service whose pod runs on another node, and the kubernetes
	// Service it could not reach before.
	lbl := map[string]string{"app": "podcontract"}
	deployment(t, "podcontract", 1, lbl, 1, tcpPort(80))
	svc := service(t, c.bothFamilies(simpleService("podcontract", 80, tcp, lbl)))
	pods := waitPods(t, lbl, 1)
	// kube-controller-manager's lag is not the contract's: the pod must be in
	// the Service's EndpointSlice before svcproxy is asked to serve it.
	poll.Eventually(t, 3*time.Minute, "the podcontract pod in its EndpointSlice", func() (bool, string) {
		got, err := readyEndpoints(context.Background(), "podcontract")
		return err == nil && len(got) > 0, fmt.Sprintf("%v %v", got, err)
	})
	cl := &podClient{name: contractNode, node: contractNode, netns: n.netns, ip: n.ip}
	for _, ip := range svc.Spec.ClusterIPs { // each family's, in a dual-stack cluster
		expectAnswers(t, cl, ip, 80, names(pods))
	}
	if v, err := cl.get("https://" + net.JoinHostPort(kubernetesIP, "443") + "/version"); err != nil || !strings.Contains(v, k8sVersion) {
		t.Errorf("https://%s/version from %s through svcproxy: %q, %v", kubernetesIP, contractNode, v, err)
	}

	if p.exited() {
		t.Fatalf("svcproxy exited (%v):\n%s", p.Err(), tail(logPath, 30))
	}
	// A right it lacks shows in its log even where nothing above depends on
	// it: "forbidden" from the API server (events, a retried watch), EPERM or
	// EACCES from the kernel (the takeover of kube-proxy's leftovers, conntrack).
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var refused []string
	for _, line := range strings.Split(string(b), "\n") {
		l := strings.ToLower(line)
		if strings.Contains(l, "forbidden") || strings.Contains(l, "operation not permitted") || strings.Contains(l, "permission denied") {
			refused = append(refused, line)
		}
	}
	if len(refused) > 0 {
		t.Errorf("svcproxy was refused something its ClusterRole or capabilities should grant:\n%s", strings.Join(refused, "\n"))
	}
}

// renderForTestCluster renders deploy/kind/ with the per-cluster values
// replaced the way that overlay replaces deploy/'s: a configMapGenerator merge
// of the ConfigMap's literals, here the test cluster's control plane and pod
// CIDRs.
func renderForTestCluster(t *testing.T, work string) *install.Install {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(work, "overlay")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// kustomize takes bases by relative path only.
	base, err := filepath.Rel(dir, filepath.Join(root, "deploy", "kind"))
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
configMapGenerator:
- name: svcproxy-cluster
  namespace: kube-system
  behavior: merge
  literals:
  - host=%s
  - port=%d
  - cluster-cidr=%s
`, base, theCluster.cp().ip, apiPort, theCluster.family.clusterCIDRs())
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := install.Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// repoRoot is the directory of svcproxy's go.mod, above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module github.com/svcproxy/svcproxy\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no svcproxy go.mod above the working directory")
		}
		dir = parent
	}
}

// applyInstall creates what `kubectl apply -k` would, except the DaemonSet
// (no kubelet here runs it; the test plays its pod), and removes it after.
func applyInstall(t *testing.T, ctx context.Context, in *install.Install) {
	t.Helper()
	c := theCluster
	var undo []func(context.Context) error
	t.Cleanup(func() {
		for i := len(undo) - 1; i >= 0; i-- {
			if err := undo[i](context.Background()); err != nil && !apierrors.IsNotFound(err) {
				t.Logf("remove the install: %v", err)
			}
		}
	})
	create := func(what string, err error, del func(context.Context) error) {
		if err != nil {
			t.Fatalf("apply %s: %v", what, err)
		}
		undo = append(undo, del)
	}
	for _, o := range in.ServiceAccounts {
		_, err := c.client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
		create("ServiceAccount "+o.Name, err, func(ctx context.Context) error {
			return c.client.CoreV1().ServiceAccounts(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{})
		})
	}
	for _, o := range in.ConfigMaps {
		_, err := c.client.CoreV1().ConfigMaps(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
		create("ConfigMap "+o.Name, err, func(ctx context.Context) error {
			return c.client.CoreV1().ConfigMaps(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{})
		})
	}
	for _, o := range in.ClusterRoles {
		_, err := c.client.RbacV1().ClusterRoles().Create(ctx, &o, metav1.CreateOptions{})
		create("ClusterRole "+o.Name, err, func(ctx context.Context) error {
			return c.client.RbacV1().ClusterRoles().Delete(ctx, o.Name, metav1.DeleteOptions{})
		})
	}
	for _, o := range in.ClusterRoleBindings {
		_, err := c.client.RbacV1().ClusterRoleBindings().Create(ctx, &o, metav1.CreateOptions{})
		create("ClusterRoleBinding "+o.Name, err, func(ctx context.Context) error {
			return c.client.RbacV1().ClusterRoleBindings().Delete(ctx, o.Name, metav1.DeleteOptions{})
		})
	}
}

// addContractNode adds a node namespace on the cluster's bridge, routed like
// the others, and its Node object, unschedulable so that no other scenario's
// pods land where no node agent runs. Removed with the test.
func addContractNode(t *testing.T, ctx context.Context) *node {
	t.Helper()
	c := theCluster
	ips := c.family.pick(contractIP, contractIP6)
	n := &node{name: contractNode, short: contractShort, netns: c.prefix + contractShort, ip: ips[0], ips: ips}
	t.Cleanup(func() {
		if err := netns.Delete(n.netns); err != nil {
			t.Logf("remove %s: %v", n.netns, err)
		}
	})
	cmds := [][]string{
		{"netns", "add", n.netns},
		{"-n", n.netns, "link", "set", "lo", "up"},
		{"-n", c.bridgeNetns, "link", "add", "vnpc", "type", "veth", "peer", "name", "eth0", "netns", n.netns},
		{"-n", c.bridgeNetns, "link", "set", "vnpc", "master", "br0"},
		{"-n", c.bridgeNetns, "link", "set", "vnpc", "up"},
	}
	cmds = append(cmds, c.family.addrCmds(n.netns, "eth0", contractIP, contractIP6)...)
	cmds = append(cmds, []string{"-n", n.netns, "link", "set", "eth0", "up"})
	for _, gw := range c.family.pick(gatewayIP, gatewayIP6) {
		cmds = append(cmds, []string{"-n", n.netns, "route", "add", "default", "via", gw})
	}
	for _, m := range c.nodes {
		for i, cidr := range m.podCIDRs { // each family's pod range via that family's node address
			cmds = append(cmds, []string{"-n", n.netns, "route", "add", cidr, "via", m.ips[i]})
		}
	}
	for _, a := range cmds {
		if err := netns.IP(a...); err != nil {
			t.Fatal(err)
		}
	}
	obj := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{
			"kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		}},
		Spec: corev1.NodeSpec{Unschedulable: true},
	}
	created, err := c.client.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Node %s: %v", n.name, err)
	}
	// Its InternalIPs, as kubelet reports them: the proxy takes its primary
	// family (IPv6 in an IPv6-only cluster) and node IPs from there.
	created.Status.Addresses = nodeAddresses(n)
	if _, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("Node %s status: %v", n.name, err)
	}
	t.Cleanup(func() {
		if err := c.client.CoreV1().Nodes().Delete(context.Background(), n.name, metav1.DeleteOptions{}); err != nil {
			t.Logf("delete Node %s: %v", n.name, err)
		}
	})
	return n
}

// contractCommand is the command line that runs the container's process in
// the node's namespace as a container runtime would, as far as svcproxy can
// tell: a private mount namespace (never the host's mounts) with a root of its
// own (a tmpfs at root, read-only as readOnlyRootFilesystem makes it) that holds
// the binary at its path in the image, the pod's hostPath volumes and the
// ServiceAccount directory (read-only) at their in-pod paths, and the host's
// /usr, /proc, /sys, /dev... for the wrapper's own tools; then, chrooted there
// with the working directory /, exactly the pod's environment (env -i) and
// setpriv: the pod's user and group, no supplementary groups, bounding set =
// the pod's capabilities, no inheritable or ambient ones, and no_new_privs when
// the pod disallows escalation.
func contractCommand(t *testing.T, ctr *podContainer, binary, saDir, root string) []string {
	t.Helper()
	abs := func(cmd string) string {
		p, err := exec.LookPath(cmd)
		if err != nil {
			t.Fatalf("%s: %v (coreutils, util-linux)", cmd, err)
		}
		return p
	}
	quoted := []string{binary, saDir, root, ctr.argv[0]}
	for _, m := range ctr.mounts {
		quoted = append(quoted, m.hostPath, m.mountPath)
	}
	for _, s := range append(quoted, ctr.env...) {
		if strings.ContainsAny(s, "'\n") {
			t.Fatalf("%q cannot be quoted for sh", s)
		}
	}
	mount, mkdir := abs("mount"), abs("mkdir")
	var b strings.Builder
	fmt.Fprintf(&b, "set -e\nr='%s'\n%s -t tmpfs -o mode=0755 tmpfs \"$r\"\n", root, mount)
	// The host's top level: symlinks as they are (merged /usr), the system
	// directories bound, nothing else (no /var, /home, /run, /tmp).
	fmt.Fprintf(&b, `for e in /*; do
	n=${e#/}
	if [ -L "$e" ]; then %s -s "$(%s "$e")" "$r/$n"
	else case $n in usr|bin|sbin|lib|lib32|lib64|libx32|etc|proc|sys|dev) %s "$r/$n"; %s --rbind "$e" "$r/$n";; esac
	fi
done
`, abs("ln"), abs("readlink"), mkdir, mount)
	bind := func(from, to string, ro bool) {
		fmt.Fprintf(&b, "%s --bind '%s' \"$r\"'%s'\n", mount, from, to)
		if ro {
			fmt.Fprintf(&b, "%s -o remount,bind,ro \"$r\"'%s'\n", mount, to)
		}
	}
	fmt.Fprintf(&b, "%s -p \"$r\"'%s'\n%s \"$r\"'%s'\n", mkdir, filepath.Dir(ctr.argv[0]), abs("touch"), ctr.argv[0])
	bind(binary, ctr.argv[0], true)
	for _, m := range ctr.mounts {
		fmt.Fprintf(&b, "%s -p \"$r\"'%s'\n", mkdir, m.mountPath)
		bind(m.hostPath, m.mountPath, m.readOnly)
	}
	fmt.Fprintf(&b, "%s -p \"$r\"'%s'\n", mkdir, saMountPath)
	bind(saDir, saMountPath, true)
	fmt.Fprintf(&b, "%s -o remount,ro \"$r\"\nexec %s \"$r\" \"$@\"", mount, abs("chroot"))

	caps := "-all"
	for _, c := range ctr.caps {
		caps += ",+" + c
	}
	priv := []string{abs("setpriv"),
		fmt.Sprintf("--reuid=%d", ctr.uid), fmt.Sprintf("--regid=%d", ctr.gid), "--clear-groups",
		"--bounding-set=" + caps, "--inh-caps=-all", "--ambient-caps=-all",
	}
	if ctr.nnp {
		priv = append(priv, "--no-new-privs")
	}
	// env -i last, so that the shell adds nothing (dash exports PWD) and
	// keeps kubelet's order.
	argv := []string{abs("unshare"), "--mount", "--propagation=private", "--", abs("sh"), "-c", b.String(), "sh", abs("env"), "-i"}
	argv = append(argv, ctr.env...)
	argv = append(argv, priv...)
	argv = append(argv, "--")
	return append(argv, ctr.argv...)
}

// checkContractProcess reads back from /proc what the running svcproxy got:
// exactly the pod's environment, user and capabilities, no_new_privs, and the
// ServiceAccount directory mounted read-only where the pod has it. The
// scenario proves nothing if the wrapper above did not do its job.
func checkContractProcess(t *testing.T, pid int, ctr *podContainer) {
	t.Helper()
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00"); !slices.Equal(got, ctr.env) {
		t.Errorf("svcproxy's environment\n%q\nwant\n%q", got, ctr.env)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var want uint64
	for _, c := range ctr.caps {
		bit, ok := capBits[c]
		if !ok {
			t.Fatalf("capability %q: add it to capBits", c)
		}
		want |= 1 << bit
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		fields[k] = strings.TrimSpace(v)
	}
	for _, k := range []string{"CapBnd", "CapPrm", "CapEff"} {
		got, err := strconv.ParseUint(fields[k], 16, 64)
		if err != nil || got != want {
			t.Errorf("svcproxy's %s = %s, want %016x (%v)", k, fields[k], want, ctr.caps)
		}
	}
	for _, k := range []string{"CapInh", "CapAmb"} {
		if got, _ := strconv.ParseUint(fields[k], 16, 64); got != 0 {
			t.Errorf("svcproxy's %s = %s, want none", k, fields[k])
		}
	}
	wantNNP := "0"
	if ctr.nnp {
		wantNNP = "1"
	}
	if fields["NoNewPrivs"] != wantNNP {
		t.Errorf("svcproxy's NoNewPrivs = %q, want %s", fields["NoNewPrivs"], wantNNP)
	}
	if uid := strings.Fields(fields["Uid"]); len(uid) != 4 || uid[1] != strconv.FormatInt(ctr.uid, 10) {
		t.Errorf("svcproxy's Uid = %q, want %d", fields["Uid"], ctr.uid)
	}
	mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Mount points as the process sees them, relative to its root.
	options := map[string][]string{}
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 5 {
			options[f[4]] = strings.Split(f[5], ",")
		}
	}
	wantMounts := []hostMount{{mountPath: "/", readOnly: true}, {mountPath: ctr.argv[0], readOnly: true}, {mountPath: saMountPath, readOnly: true}}
	for _, m := range append(wantMounts, ctr.mounts...) {
		opts, ok := options[m.mountPath]
		switch {
		case !ok:
			t.Errorf("no mount at %s in svcproxy's mount namespace", m.mountPath)
		case slices.Contains(opts, "ro") != m.readOnly:
			t.Errorf("mount at %s: options %v, want read-only %v", m.mountPath, opts, m.readOnly)
		}
	}
}

// capBits are the capability numbers (linux/capability.h) of the names the
// manifests may grant.
var capBits = map[string]uint{
	"chown": 0, "dac_override": 1, "fowner": 3, "fsetid": 4, "kill": 5, "setgid": 6, "setuid": 7,
	"setpcap": 8, "net_bind_service": 10, "net_admin": 12, "net_raw": 13, "sys_chroot": 18,
	"sys_admin": 21, "sys_resource": 24, "mknod": 27, "audit_write": 29, "setfcap": 31,
}
