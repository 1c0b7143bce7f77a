//go:build e2enode

package e2enode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcproxy/svcproxy/internal/controlplane"
	"github.com/svcproxy/svcproxy/internal/kubepki"
	"github.com/svcproxy/svcproxy/internal/netns"
)

// The cluster: test/e2e's topology (one namespace per node on a bridge
// namespace, "the docker network"), with a real kubelet and containerd on
// every node, as kind's control plane and two workers. The control plane
// node is tainted, so only the proxies' DaemonSet pods run there; the
// client pods run on the workers.
const (
	serviceCIDR = "10.96.0.0/16"
	clusterCIDR = "10.244.0.0/16"
	kubeIP      = "10.96.0.1"
	// The IPv6 side of a dual-stack cluster (E2ENODE_FAMILY=dual), as test/e2e's.
	serviceCIDR6 = "fd00:10:96::/112"
	clusterCIDR6 = "fd00:10:244::/56"
	apiPort      = 6443
	k8sVersion   = "v1.37.2"
	// The controllers a user relies on for Deployments, DaemonSets and
	// ServiceAccount tokens; the node lifecycle controller lifts the
	// not-ready taint new Nodes get once kubelet reports Ready.
	controllerList = "deployment-controller,replicaset-controller,daemonset-controller," +
		"serviceaccount-controller,serviceaccount-token-controller,root-ca-certificate-publisher-controller," +
		"endpointslice-controller,namespace-controller,garbage-collector-controller," +
		"node-lifecycle-controller,pod-garbage-collector-controller," +
		// What upstream's e2e suite also relies on (make conformance): legacy
		// Endpoints and their mirroring into slices, ReplicationControllers,
		// Jobs, and the ServiceCIDR controller that marks a new ServiceCIDR Ready.
		"endpoints-controller,endpointslice-mirroring-controller,replicationcontroller-controller,job-controller," +
		"service-cidr-controller"
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
	workers    int    // E2ENODE_WORKERS, default 2; upstream's suite needs 3
	clusterDNS string // E2ENODE_CLUSTER_DNS: kubelets' clusterDNS, where CoreDNS will be
	// dual is E2ENODE_FAMILY=dual: IPv4 first, IPv6 second, for nodes, pods
	// and Services (upstream's [Feature:IPv6DualStack] specs).
	dual bool
}

type node struct {
	name     string // Node object
	short    string // cp, w1, w2
	netns    string
	ip       string
	podCIDR  string
	ips      []string // ip first, then the IPv6 address in a dual-stack cluster
	podCIDR6 string   // a dual-stack cluster's IPv6 pod range, else ""
	worker   bool
	dir      string // containerd and kubelet state
	cgroup   string // kubelet's cgroupRoot, "/<prefix><short>"
	runtime  string // pids cgroup of containerd and its shims

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

// podCIDRs are node n's pod ranges, one per family of the cluster.
func (n *node) podCIDRs() []string {
	if n.podCIDR6 == "" {
		return []string{n.podCIDR}
	}
	return []string{n.podCIDR, n.podCIDR6}
}

// serviceCIDRs and clusterCIDRs are the cluster's ranges, comma separated as
// the flags and kube-proxy's configuration take them.
func (c *cluster) serviceCIDRs() string { return c.perFamily(serviceCIDR, serviceCIDR6) }
func (c *cluster) clusterCIDRs() string { return c.perFamily(clusterCIDR, clusterCIDR6) }

func (c *cluster) perFamily(v4, v6 string) string {
	if c.cfg.dual {
		return v4 + "," + v6
	}
	return v4
}
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
	dir, logDir, err := controlplane.WorkDir(cfg.prefix)
	if err != nil {
		return nil, err
	}
	c := &cluster{cfg: cfg, dir: dir, logDir: logDir, bridgeNetns: cfg.prefix + "net"}
	for i, k := range controlplane.KindNodesWith(cfg.prefix, cfg.workers) {
		n := &node{
			name:    k.Name,
			short:   k.Short,
			netns:   k.Netns,
			ip:      k.IP,
			podCIDR: k.PodCIDR,
			ips:     []string{k.IP},
			worker:  k.Worker,
			dir:     filepath.Join(dir, k.Short),
			cgroup:  "/" + cfg.prefix + k.Short,
			runtime: "/" + cfg.prefix + k.Short + "-runtime",
		}
		if cfg.dual {
			// The IPv4 address's last byte, on the bridge's IPv6 /64.
			n.ips = append(n.ips, fmt.Sprintf("fd00:172:18::%d", i+2))
			n.podCIDR6 = fmt.Sprintf("fd00:10:244:%d::/64", i)
		}
		c.nodes = append(c.nodes, n)
	}
	return c, nil
}

// up brings the cluster up; on error the caller tears down.
func (c *cluster) up(ctx context.Context) error {
	steps := []controlplane.Step{
		{Name: "network", Fn: c.setupNetwork},
		{Name: "pki", Fn: c.setupPKI},
		{Name: "control plane", Fn: c.startControlPlane},
		{Name: "containerd", Fn: c.startRuntimes},
		{Name: "images", Fn: c.importImages},
		{Name: "kubelets", Fn: c.startKubelets},
	}
	return controlplane.RunSteps(ctx, c.logf, steps)
}

// setupNetwork builds test/e2e's network (internal/controlplane).
func (c *cluster) setupNetwork(context.Context) error {
	var nodes []controlplane.Node
	for _, n := range c.nodes {
		nodes = append(nodes, controlplane.Node{Netns: n.netns, IPs: n.ips, PodCIDRs: n.podCIDRs()})
	}
	return controlplane.SetupNetwork(c.bridgeNetns, nodes)
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

// startControlPlane starts test/e2e's control plane (internal/controlplane)
// with what kubeadm sets for real kubelets: the Node authorizer, privileged
// pods (kube-proxy's DaemonSet is privileged, as kubeadm's is) and the
// credentials the API server reaches kubelets with (kubectl logs).
func (c *cluster) startControlPlane(ctx context.Context) error {
	p := c.pki.Path
	cp, err := controlplane.Start(ctx, controlplane.Config{
		Dir:               c.dir,
		LogDir:            c.logDir,
		Netns:             c.cp().netns,
		Bin:               c.k8sBin,
		PKI:               p,
		Client:            c.client,
		EtcdName:          "e2enode",
		AdvertiseAddress:  c.cp().ip,
		APIPort:           apiPort,
		ServiceCIDR:       c.serviceCIDRs(),
		AuthorizationMode: "Node,RBAC",
		APIServerArgs: []string{
			"--allow-privileged=true",
			"--kubelet-client-certificate=" + p("admin.crt"),
			"--kubelet-client-key=" + p("admin.key"),
			"--kubelet-preferred-address-types=InternalIP",
		},
		Controllers: controllerList,
	})
	c.control = append(c.control, cp.Procs()...)
	return err
}

// teardown in the order the probe found works: kubelet, pods' processes,
// containerd (and its shims), cgroups, then the control plane (API server
// before etcd), the mounts under the work directory, namespaces.
func (c *cluster) teardown() {
	c.teardownOnce.Do(func() {
		for _, n := range c.nodes {
			if n.kubelet != nil {
				n.kubelet.Stop(5 * time.Second)
			}
			killCgroup(n.cgroup)
			if n.containerd != nil {
				n.containerd.Stop(5 * time.Second)
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
			c.control[i].Stop(5 * time.Second)
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
