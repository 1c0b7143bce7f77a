//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcproxy/svcproxy/internal/netns"

	"github.com/svcproxy/svcproxy/internal/poll"
)

// The simulated kind cluster. Every namespace name starts with the run's
// prefix; the root network namespace is never changed.
const (
	namePrefix     = "spe2e-" // + owner pid + "-" + random: stale runs are found by pid
	gatewayIP      = "172.18.0.1"
	bridgeBits     = "/16"
	serviceCIDR    = "10.96.0.0/16"
	clusterCIDR    = "10.244.0.0/16"
	kubernetesIP   = "10.96.0.1"
	apiPort        = 6443
	healthzPort    = 10256
	metricsPort    = 10249
	k8sVersion     = "v1.37.2"
	controllerList = "endpointslice-controller,serviceaccount-controller,deployment-controller,replicaset-controller,garbage-collector-controller"
)

type node struct {
	name    string // Node object
	short   string // cp, w1, w2
	netns   string
	ip      string
	podCIDR string
	worker  bool
	agent   *proc

	mu        sync.Mutex
	proxy     *proc
	proxyKind string // what proxy runs: the run's, or another during a swap scenario
}

type cluster struct {
	prefix      string
	dir         string
	logDir      string
	bins        string
	proxyKind   string
	svcproxyBin string
	agentBin    string
	bridgeNetns string
	nodes       []*node
	pki         *pki
	adminKC     string
	proxyKC     string
	benchOnly   bool    // no node agents, no proxies: see config.bench
	control     []*proc // started in this order, stopped in reverse
	etcd        *proc
	apiserver   *proc
	client      kubernetes.Interface
	rest        *rest.Config

	teardownOnce sync.Once
}

func (c *cluster) cp() *node        { return c.nodes[0] }
func (c *cluster) workers() []*node { return c.nodes[1:] }
func (c *cluster) logf(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s e2e: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(f, a...))
}

// cleanupStale removes namespaces left behind by runs whose owner process
// is gone (a killed run). Only names with this harness's prefix are touched.
func cleanupStale() {
	for _, name := range netns.List(namePrefix) {
		rest := strings.TrimPrefix(name, namePrefix)
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 1 {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			continue // owner alive: a concurrent run
		}
		fmt.Fprintf(os.Stderr, "e2e: removing stale namespace %s\n", name)
		_ = netns.Delete(name)
	}
	// Work dirs (logs) of failed or killed runs are kept for an hour.
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), namePrefix+"*"))
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() && time.Since(fi.ModTime()) > time.Hour {
			_ = os.RemoveAll(d)
		}
	}
}

func newCluster(cfg config) (*cluster, error) {
	prefix := cfg.prefix
	if prefix == "" {
		prefix = fmt.Sprintf("%s%d-%04x-", namePrefix, os.Getpid(), time.Now().UnixNano()&0xffff)
	}
	dir, err := os.MkdirTemp("", strings.TrimSuffix(prefix, "-")+".")
	if err != nil {
		return nil, err
	}
	c := &cluster{
		prefix:      prefix,
		dir:         dir,
		logDir:      filepath.Join(dir, "logs"),
		bins:        cfg.bins,
		proxyKind:   cfg.proxy,
		svcproxyBin: cfg.svcproxyBin,
		agentBin:    cfg.agentBin,
		bridgeNetns: prefix + "net",
		benchOnly:   cfg.bench,
	}
	if err := os.MkdirAll(c.logDir, 0o755); err != nil {
		return nil, err
	}
	names := []string{"svcproxy-control-plane", "svcproxy-worker", "svcproxy-worker2"}
	shorts := []string{"cp", "w1", "w2"}
	for i := range names {
		c.nodes = append(c.nodes, &node{
			name:    names[i],
			short:   shorts[i],
			netns:   prefix + shorts[i],
			ip:      fmt.Sprintf("172.18.0.%d", i+2),
			podCIDR: fmt.Sprintf("10.244.%d.0/24", i),
			worker:  i > 0,
		})
	}
	return c, nil
}

// up brings the whole cluster up; on error the caller tears down.
func (c *cluster) up(ctx context.Context) error {
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"network", c.setupNetwork},
		{"outside", c.setupOutside},
		{"pki", c.setupPKI},
		{"control plane", c.startControlPlane},
		{"nodes", c.registerNodes},
		{"node agents", c.startAgents},
		{"proxies", c.startProxies},
	}
	if c.benchOnly {
		steps = steps[:4] // through the Nodes
	}
	for _, s := range steps {
		start := time.Now()
		if err := s.fn(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		c.logf("%s ready in %v", s.name, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

func (c *cluster) setupNetwork(context.Context) error {
	br := c.bridgeNetns
	cmds := [][]string{
		{"netns", "add", br},
		{"-n", br, "link", "set", "lo", "up"},
		{"-n", br, "link", "add", "br0", "type", "bridge"},
		{"-n", br, "addr", "add", gatewayIP + bridgeBits, "dev", "br0"},
		{"-n", br, "link", "set", "br0", "up"},
	}
	for i, n := range c.nodes {
		port := fmt.Sprintf("vn%d", i)
		cmds = append(cmds,
			[]string{"netns", "add", n.netns},
			[]string{"-n", n.netns, "link", "set", "lo", "up"},
			[]string{"-n", br, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", n.netns},
			[]string{"-n", br, "link", "set", port, "master", "br0"},
			[]string{"-n", br, "link", "set", port, "up"},
			[]string{"-n", n.netns, "addr", "add", n.ip + bridgeBits, "dev", "eth0"},
			[]string{"-n", n.netns, "link", "set", "eth0", "up"},
			[]string{"-n", n.netns, "route", "add", "default", "via", gatewayIP},
		)
		for _, m := range c.nodes {
			if m != n {
				cmds = append(cmds, []string{"-n", n.netns, "route", "add", m.podCIDR, "via", m.ip})
			}
		}
	}
	for _, a := range cmds {
		if err := netns.IP(a...); err != nil {
			return err
		}
	}
	for _, n := range c.nodes {
		if _, err := netns.Exec(n.netns, "sysctl", "-q", "-w",
			"net.ipv4.ip_forward=1",
			"net.ipv4.conf.all.rp_filter=0",
			"net.ipv4.conf.default.rp_filter=0",
		); err != nil {
			return err
		}
	}
	return nil
}

func (c *cluster) setupPKI(context.Context) error {
	p, err := newPKI(filepath.Join(c.dir, "pki"))
	if err != nil {
		return err
	}
	c.pki = p
	cp := c.cp()
	if err := p.issue("apiserver", "kube-apiserver", nil,
		[]string{"127.0.0.1", cp.ip, kubernetesIP},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	); err != nil {
		return err
	}
	local := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	if c.adminKC, err = p.kubeconfig("admin", local, "e2e-admin", "system:masters"); err != nil {
		return err
	}
	if _, err = p.kubeconfig("kcm", local, "system:kube-controller-manager"); err != nil {
		return err
	}
	if _, err = p.kubeconfig("scheduler", local, "system:kube-scheduler"); err != nil {
		return err
	}
	// The proxies run on every node and reach the API server over the bridge.
	if c.proxyKC, err = p.kubeconfig("proxy", fmt.Sprintf("https://%s:%d", cp.ip, apiPort), "system:kube-proxy"); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.adminKC)
	if err != nil {
		return err
	}
	cfg.Dial = netns.DialFunc(cp.netns, 5*time.Second)
	cfg.QPS, cfg.Burst = 200, 400
	c.rest = cfg
	c.client, err = kubernetes.NewForConfig(cfg)
	return err
}

func (c *cluster) bin(name string) string { return filepath.Join(c.bins, name) }

func (c *cluster) startControlPlane(ctx context.Context) error {
	cp := c.cp()
	p := c.pki.path
	etcd, err := c.start("etcd", cp.netns, c.bin("etcd"),
		"--name=e2e",
		"--data-dir="+filepath.Join(c.dir, "etcd"),
		"--listen-client-urls=http://127.0.0.1:2379",
		"--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380",
		"--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=e2e=http://127.0.0.1:2380",
		"--unsafe-no-fsync",
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	c.control = append(c.control, etcd)
	c.etcd = etcd
	api, err := c.start("kube-apiserver", cp.netns, c.bin("kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=0.0.0.0",
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--advertise-address="+cp.ip,
		"--service-cluster-ip-range="+serviceCIDR,
		"--authorization-mode=RBAC",
		"--client-ca-file="+p("ca.crt"),
		"--tls-cert-file="+p("apiserver.crt"),
		"--tls-private-key-file="+p("apiserver.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+p("sa.key"),
		"--service-account-signing-key-file="+p("sa.key"),
		"--cert-dir="+filepath.Join(c.dir, "apiserver"),
		"--profiling=false",
	)
	if err != nil {
		return err
	}
	c.control = append(c.control, api)
	c.apiserver = api
	if err := c.waitAPIReady(ctx); err != nil {
		return err
	}
	kcm, err := c.start("kube-controller-manager", cp.netns, c.bin("kube-controller-manager"),
		"--kubeconfig="+p("kcm.kubeconfig"),
		"--authentication-kubeconfig="+p("kcm.kubeconfig"),
		"--authorization-kubeconfig="+p("kcm.kubeconfig"),
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+p("sa.key"),
		"--root-ca-file="+p("ca.crt"),
		"--controllers="+controllerList,
	)
	if err != nil {
		return err
	}
	c.control = append(c.control, kcm)
	sched, err := c.start("kube-scheduler", cp.netns, c.bin("kube-scheduler"),
		"--kubeconfig="+p("scheduler.kubeconfig"),
		"--authentication-kubeconfig="+p("scheduler.kubeconfig"),
		"--authorization-kubeconfig="+p("scheduler.kubeconfig"),
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
		"-v="+envOr("E2E_SCHEDULER_V", "0"),
	)
	if err != nil {
		return err
	}
	c.control = append(c.control, sched)
	// The serviceaccount controller creates "default"; Pods need it.
	err = poll.UntilOrAbort(ctx, 60*time.Second, 250*time.Millisecond, func() (bool, string, error) {
		if kcm.exited() {
			return false, "", errors.New("kube-controller-manager exited")
		}
		_, err := c.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err), nil
	})
	if err != nil {
		return fmt.Errorf("default ServiceAccount: %w", err)
	}
	return nil
}

func (c *cluster) registerNodes(ctx context.Context) error {
	for _, n := range c.nodes {
		obj := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name: n.name,
				Labels: map[string]string{
					"kubernetes.io/hostname": n.name,
					"kubernetes.io/os":       "linux",
					"kubernetes.io/arch":     "amd64",
				},
			},
			Spec: corev1.NodeSpec{PodCIDR: n.podCIDR, PodCIDRs: []string{n.podCIDR}},
		}
		if !n.worker {
			obj.Labels["node-role.kubernetes.io/control-plane"] = ""
			obj.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
		}
		created, err := c.client.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		res := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("2"),
			corev1.ResourceMemory: resource.MustParse("8Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		}
		created.Status = corev1.NodeStatus{
			Capacity:    res,
			Allocatable: res,
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "E2EAgentReady",
				LastHeartbeatTime: now, LastTransitionTime: now,
			}},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: n.ip},
				{Type: corev1.NodeHostName, Address: n.name},
			},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion: k8sVersion, OperatingSystem: "linux", Architecture: "amd64",
				ContainerRuntimeVersion: "e2e://netns",
			},
		}
		updated, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		// The TaintNodesByCondition admission plugin taints new Nodes
		// not-ready; the node lifecycle controller (not run here) would
		// lift it once the Ready condition holds. Lift it ourselves.
		var taints []corev1.Taint
		for _, t := range updated.Spec.Taints {
			if t.Key != corev1.TaintNodeNotReady {
				taints = append(taints, t)
			}
		}
		if len(taints) != len(updated.Spec.Taints) {
			updated.Spec.Taints = taints
			if _, err := c.client.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *cluster) startAgents(context.Context) error {
	for _, n := range c.workers() {
		p, err := c.start("nodeagent-"+n.short, "", c.agentBin,
			"--kubeconfig="+c.adminKC,
			"--api-netns="+c.cp().netns,
			"--node="+n.name,
			"--node-netns="+n.netns,
			"--node-ip="+n.ip,
			"--pod-cidr="+n.podCIDR,
			"--pod-netns-prefix="+c.prefix+n.short+"-p",
		)
		if err != nil {
			return err
		}
		n.agent = p
	}
	return nil
}

func (c *cluster) teardown() {
	c.teardownOnce.Do(func() {
		for _, n := range c.nodes {
			n.mu.Lock()
			if n.proxy != nil {
				n.proxy.stop(3 * time.Second)
			}
			n.mu.Unlock()
			if n.agent != nil {
				n.agent.stop(5 * time.Second)
			}
		}
		for i := len(c.control) - 1; i >= 0; i-- {
			c.control[i].stop(5 * time.Second)
		}
		for _, name := range netns.List(c.prefix) {
			if err := netns.Delete(name); err != nil {
				c.logf("teardown: %v", err)
			}
		}
	})
}
