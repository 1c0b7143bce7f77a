//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
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

	"github.com/svcproxy/svcproxy/internal/controlplane"
	"github.com/svcproxy/svcproxy/internal/netns"
)

// The simulated kind cluster. Every namespace name starts with the run's
// prefix; the root network namespace is never changed.
const (
	namePrefix  = "spe2e-" // + owner pid + "-" + random: stale runs are found by pid
	gatewayIP   = controlplane.GatewayIP
	bridgeBits  = controlplane.BridgeBits
	serviceCIDR = "10.96.0.0/16"
	// benchServiceCIDR holds the bench's 100k ClusterIPs (benchClusterIP, from
	// 10.96.4.0 to 10.97.138.x): with the /16, the apiserver's repair loop, restarted
	// on objects written into etcd, reported each of the 35k outside it and, on a
	// slow machine, gave up its start-up check ("unable to perform initial IP and
	// Port allocation check (timeout)") and exited.
	benchServiceCIDR = "10.96.0.0/15"
	clusterCIDR      = "10.244.0.0/16"
	apiPort          = 6443
	healthzPort      = 10256
	metricsPort      = 10249
	k8sVersion       = "v1.37.2"
	controllerList   = "endpointslice-controller,serviceaccount-controller,deployment-controller,replicaset-controller,garbage-collector-controller"
)

type node struct {
	name    string // Node object
	short   string // cp, w1, w2
	netns   string
	ip      string   // primary address (the first of ips)
	ips     []string // one per family of the cluster, primary first
	podCIDR string   // primary pod CIDR (the first of podCIDRs)
	// podCIDRs has one range per family, primary first.
	podCIDRs []string
	worker   bool
	agent    *proc

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
	family      family
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
	dir, logDir, err := controlplane.WorkDir(prefix)
	if err != nil {
		return nil, err
	}
	c := &cluster{
		prefix:      prefix,
		dir:         dir,
		logDir:      logDir,
		bins:        cfg.bins,
		proxyKind:   cfg.proxy,
		family:      cfg.family,
		svcproxyBin: cfg.svcproxyBin,
		agentBin:    cfg.agentBin,
		bridgeNetns: prefix + "net",
		benchOnly:   cfg.bench,
	}
	for i, k := range controlplane.KindNodes(prefix) {
		ips := cfg.family.pick(k.IP, nodeIP6(i))
		podCIDRs := cfg.family.pick(k.PodCIDR, podCIDR6(i))
		c.nodes = append(c.nodes, &node{name: k.Name, short: k.Short, netns: k.Netns, worker: k.Worker,
			ip: ips[0], ips: ips, podCIDR: podCIDRs[0], podCIDRs: podCIDRs})
	}
	return c, nil
}

// up brings the whole cluster up; on error the caller tears down.
func (c *cluster) up(ctx context.Context) error {
	steps := []controlplane.Step{
		{Name: "network", Fn: c.setupNetwork},
		{Name: "outside", Fn: c.setupOutside},
		{Name: "pki", Fn: c.setupPKI},
		{Name: "control plane", Fn: c.startControlPlane},
		{Name: "nodes", Fn: c.registerNodes},
		{Name: "node agents", Fn: c.startAgents},
		{Name: "proxies", Fn: c.startProxies},
	}
	if c.benchOnly {
		steps = steps[:4] // through the Nodes
	}
	return controlplane.RunSteps(ctx, c.logf, steps)
}

// setupNetwork builds the bridge and the nodes' namespaces
// (internal/controlplane, shared with test/e2enode).
func (c *cluster) setupNetwork(context.Context) error {
	var nodes []controlplane.Node
	for _, n := range c.nodes {
		nodes = append(nodes, controlplane.Node{Netns: n.netns, IPs: n.ips, PodCIDRs: n.podCIDRs})
	}
	return controlplane.SetupNetwork(c.bridgeNetns, nodes)
}

func (c *cluster) setupPKI(context.Context) error {
	p, err := newPKI(filepath.Join(c.dir, "pki"))
	if err != nil {
		return err
	}
	c.pki = p
	cp := c.cp()
	if err := p.issue("apiserver", "kube-apiserver", nil,
		append(append([]string{"127.0.0.1"}, cp.ips...), c.family.pick(kubernetesIPv4, kubernetesIP6)...),
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
	if c.proxyKC, err = p.kubeconfig("proxy", "https://"+net.JoinHostPort(cp.ip, fmt.Sprint(apiPort)), "system:kube-proxy"); err != nil {
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

// apiserverBenchArgs turns kube-apiserver's profiling back on when the bench
// profiles the proxies' cold syncs: it profiles the apiserver beside them.
func apiserverBenchArgs() []string {
	if os.Getenv("E2E_BENCH_CPUPROFILE") == "" {
		return nil
	}
	return []string{"--profiling=true"}
}

func (c *cluster) bin(name string) string { return filepath.Join(c.bins, name) }

// startControlPlane starts etcd, kube-apiserver (RBAC), the controllers of
// controllerList and kube-scheduler in the control-plane node's namespace
// (internal/controlplane, shared with test/e2enode).
func (c *cluster) startControlPlane(ctx context.Context) error {
	cp, err := controlplane.Start(ctx, controlplane.Config{
		Dir:               c.dir,
		LogDir:            c.logDir,
		Netns:             c.cp().netns,
		Bin:               c.bin,
		PKI:               c.pki.path,
		Client:            c.client,
		EtcdName:          "e2e",
		AdvertiseAddress:  c.cp().ip,
		APIPort:           apiPort,
		ServiceCIDR:       c.serviceCIDRs(),
		BindAddress:       c.family.anyAddr(),
		AuthorizationMode: "RBAC",
		Controllers:       controllerList,
		SchedulerArgs:     []string{"-v=" + envOr("E2E_SCHEDULER_V", "0")},
		APIServerArgs:     apiserverBenchArgs(),
	})
	for _, p := range cp.Procs() {
		c.control = append(c.control, &proc{p})
	}
	if cp.Etcd != nil {
		c.etcd = c.control[0]
	}
	if cp.APIServer != nil {
		c.apiserver = c.control[1]
	}
	return err
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
			Spec: corev1.NodeSpec{PodCIDR: n.podCIDR, PodCIDRs: n.podCIDRs},
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
			Addresses: nodeAddresses(n),
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
			"--node-ip="+strings.Join(n.ips, ","),
			"--pod-cidr="+strings.Join(n.podCIDRs, ","),
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

// serviceCIDRs is the apiserver's --service-cluster-ip-range: the bench's wider
// one for IPv4 in a bench-only cluster.
func (c *cluster) serviceCIDRs() string {
	v4 := serviceCIDR
	if c.benchOnly {
		v4 = benchServiceCIDR
	}
	return strings.Join(c.family.pick(v4, serviceCIDR6), ",")
}
