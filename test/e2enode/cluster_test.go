//go:build e2enode

package e2enode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcproxy/svcproxy/internal/kubepki"
	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/internal/poll"
)

// The cluster: test/e2e's topology (one namespace per node on a bridge
// namespace, "the docker network"), with a real kubelet and containerd on
// every node, as kind's control plane and two workers. The control plane
// node is tainted, so only the proxies' DaemonSet pods run there; the
// client pods run on the workers.
const (
	gatewayIP   = "172.18.0.1"
	bridgeBits  = "/16"
	serviceCIDR = "10.96.0.0/16"
	clusterCIDR = "10.244.0.0/16"
	kubeIP      = "10.96.0.1"
	apiPort     = 6443
	k8sVersion  = "v1.37.2"
	// The controllers a user relies on for Deployments, DaemonSets and
	// ServiceAccount tokens; the node lifecycle controller lifts the
	// not-ready taint new Nodes get once kubelet reports Ready.
	controllerList = "deployment-controller,replicaset-controller,daemonset-controller," +
		"serviceaccount-controller,serviceaccount-token-controller,root-ca-certificate-publisher-controller," +
		"endpointslice-controller,namespace-controller,garbage-collector-controller," +
		"node-lifecycle-controller,pod-garbage-collector-controller"
)

type config struct {
	prefix     string // every namespace, cgroup and directory name starts with it
	k8sBins    string // etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy
	nodeBins   string // kubelet, kubectl
	images     string // OCI archives: pause.tar, echoserver.tar, kube-proxy.tar, svcproxy.tar
	svcproxy   string // bin/svcproxy, for the suite's own cleanup of the table between phases
	repo       string // the repository root (deploy/)
	keep       bool
	nodeReadyT time.Duration
}

type node struct {
	name    string // Node object
	short   string // cp, w1, w2
	netns   string
	ip      string
	podCIDR string
	worker  bool
	dir     string // containerd and kubelet state
	cgroup  string // kubelet's cgroupRoot, "/<prefix><short>"
	runtime string // pids cgroup of containerd and its shims

	containerd *proc
	kubelet    *proc
}

type cluster struct {
	cfg         config
	dir         string
	logDir      string
	bridgeNetns string
	nodes       []*node
	pki         *kubepki.PKI
	adminKC     string
	control     []*proc
	client      kubernetes.Interface

	teardownOnce sync.Once
}

func (c *cluster) cp() *node { return c.nodes[0] }
func (c *cluster) workers() []*node {
	var w []*node
	for _, n := range c.nodes {
		if n.worker {
			w = append(w, n)
		}
	}
	return w
}

func (c *cluster) logf(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s e2enode: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(f, a...))
}

func (c *cluster) k8sBin(name string) string  { return filepath.Join(c.cfg.k8sBins, name) }
func (c *cluster) nodeBin(name string) string { return filepath.Join(c.cfg.nodeBins, name) }

func newCluster(cfg config) (*cluster, error) {
	dir, err := os.MkdirTemp("", strings.TrimSuffix(cfg.prefix, "-")+".")
	if err != nil {
		return nil, err
	}
	c := &cluster{cfg: cfg, dir: dir, logDir: filepath.Join(dir, "logs"), bridgeNetns: cfg.prefix + "net"}
	if err := os.MkdirAll(c.logDir, 0o755); err != nil {
		return nil, err
	}
	names := []string{"svcproxy-control-plane", "svcproxy-worker", "svcproxy-worker2"}
	shorts := []string{"cp", "w1", "w2"}
	for i := range names {
		c.nodes = append(c.nodes, &node{
			name:    names[i],
			short:   shorts[i],
			netns:   cfg.prefix + shorts[i],
			ip:      fmt.Sprintf("172.18.0.%d", i+2),
			podCIDR: fmt.Sprintf("10.244.%d.0/24", i),
			worker:  i > 0,
			dir:     filepath.Join(dir, shorts[i]),
			cgroup:  "/" + cfg.prefix + shorts[i],
			runtime: "/" + cfg.prefix + shorts[i] + "-runtime",
		})
	}
	return c, nil
}

// up brings the cluster up; on error the caller tears down.
func (c *cluster) up(ctx context.Context) error {
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"network", c.setupNetwork},
		{"pki", c.setupPKI},
		{"control plane", c.startControlPlane},
		{"containerd", c.startRuntimes},
		{"images", c.importImages},
		{"kubelets", c.startKubelets},
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
			// A namespace without a default route answers locally
			// originated ClusterIP traffic with ENETUNREACH before any nat
			// hook: the bridge namespace has none, so nothing leaves.
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
	p, err := kubepki.New(filepath.Join(c.dir, "pki"), "svcproxy-e2enode-ca")
	if err != nil {
		return err
	}
	c.pki = p
	cp := c.cp()
	if err := p.Issue("apiserver", "kube-apiserver", nil,
		[]string{"127.0.0.1", cp.ip, kubeIP},
		[]string{"localhost", cp.name, "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	); err != nil {
		return err
	}
	local := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	if c.adminKC, err = p.Kubeconfig("admin", local, "e2enode-admin", "system:masters"); err != nil {
		return err
	}
	if _, err = p.Kubeconfig("kcm", local, "system:kube-controller-manager"); err != nil {
		return err
	}
	if _, err = p.Kubeconfig("scheduler", local, "system:kube-scheduler"); err != nil {
		return err
	}
	// Kubelets authenticate as their Node (the Node authorizer and the
	// NodeRestriction admission plugin check exactly this name).
	for _, n := range c.nodes {
		if _, err = p.Kubeconfig("kubelet-"+n.short, fmt.Sprintf("https://%s:%d", cp.ip, apiPort), "system:node:"+n.name, "system:nodes"); err != nil {
			return err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.adminKC)
	if err != nil {
		return err
	}
	cfg.Dial = netns.DialFunc(cp.netns, 5*time.Second)
	cfg.QPS, cfg.Burst = 100, 200
	c.client, err = kubernetes.NewForConfig(cfg)
	return err
}

func (c *cluster) startControlPlane(ctx context.Context) error {
	cp := c.cp()
	p := c.pki.Path
	etcd, err := c.start("etcd", cp.netns, c.k8sBin("etcd"),
		"--name=e2enode",
		"--data-dir="+filepath.Join(c.dir, "etcd"),
		"--listen-client-urls=http://127.0.0.1:2379",
		"--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380",
		"--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=e2enode=http://127.0.0.1:2380",
		"--unsafe-no-fsync",
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	c.control = append(c.control, etcd)
	api, err := c.start("kube-apiserver", cp.netns, c.k8sBin("kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=0.0.0.0",
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--advertise-address="+cp.ip,
		"--service-cluster-ip-range="+serviceCIDR,
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true", // kube-proxy's DaemonSet is privileged, as kubeadm's is
		"--client-ca-file="+p("ca.crt"),
		"--tls-cert-file="+p("apiserver.crt"),
		"--tls-private-key-file="+p("apiserver.key"),
		"--kubelet-client-certificate="+p("admin.crt"),
		"--kubelet-client-key="+p("admin.key"),
		"--kubelet-preferred-address-types=InternalIP",
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
	err = poll.UntilOrAbort(ctx, 90*time.Second, 200*time.Millisecond, func() (bool, string, error) {
		if api.exited() || etcd.exited() {
			return false, "", errors.New("etcd or kube-apiserver exited")
		}
		body, err := c.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, fmt.Sprintf("%v %s", err, body), nil
		}
		return string(body) == "ok", string(body), nil
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver /readyz: %w", err)
	}
	kcm, err := c.start("kube-controller-manager", cp.netns, c.k8sBin("kube-controller-manager"),
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
	sched, err := c.start("kube-scheduler", cp.netns, c.k8sBin("kube-scheduler"),
		"--kubeconfig="+p("scheduler.kubeconfig"),
		"--authentication-kubeconfig="+p("scheduler.kubeconfig"),
		"--authorization-kubeconfig="+p("scheduler.kubeconfig"),
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
	)
	if err != nil {
		return err
	}
	c.control = append(c.control, sched)
	// Pods need the "default" ServiceAccount (serviceaccount controller).
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

// teardown in the order the probe found works: kubelet, pods' processes,
// containerd (and its shims), cgroups, then the control plane (API server
// before etcd), the mounts under the work directory, namespaces.
func (c *cluster) teardown() {
	c.teardownOnce.Do(func() {
		for _, n := range c.nodes {
			if n.kubelet != nil {
				n.kubelet.stop(5 * time.Second)
			}
			killCgroup(n.cgroup)
			if n.containerd != nil {
				n.containerd.stop(5 * time.Second)
			}
			killCgroup(n.runtime)
			if err := removeCgroups(n.cgroup); err != nil {
				c.logf("teardown: %v", err)
			}
			if err := removeCgroups(n.runtime); err != nil {
				c.logf("teardown: %v", err)
			}
		}
		for i := len(c.control) - 1; i >= 0; i-- {
			c.control[i].stop(5 * time.Second)
		}
		if err := unmountUnder(c.dir); err != nil {
			c.logf("teardown: %v", err)
		}
		for _, name := range netns.List(c.cfg.prefix) {
			if err := netns.Delete(name); err != nil {
				c.logf("teardown: %v", err)
			}
		}
	})
}
