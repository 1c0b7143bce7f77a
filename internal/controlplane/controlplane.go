package controlplane

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcproxy/svcproxy/internal/poll"
)

// Config is what differs between the suites' control planes; the rest
// (ports, etcd without fsync, service account keys, no leader election) is
// the same for both.
type Config struct {
	Dir      string                   // work directory: etcd's data, the API server's cert dir
	LogDir   string                   // Proc logs
	Netns    string                   // the control-plane node's namespace
	Bin      func(name string) string // path of etcd, kube-apiserver, ...
	PKI      func(file string) string // path of ca.crt, apiserver.crt, sa.key, <name>.kubeconfig
	Client   kubernetes.Interface     // admin client, for readiness
	EtcdName string                   // etcd member name

	AdvertiseAddress  string
	APIPort           int
	ServiceCIDR       string   // one or, dual-stack, two comma-separated
	BindAddress       string   // the API server's; "" is 0.0.0.0 ("::" takes both families)
	AuthorizationMode string   // --authorization-mode
	APIServerArgs     []string // appended to the API server's flags
	Controllers       string   // --controllers of kube-controller-manager
	SchedulerArgs     []string // appended to the scheduler's flags
}

// ControlPlane is the running control plane.
type ControlPlane struct {
	Etcd, APIServer, ControllerManager, Scheduler *Proc
}

// Procs lists the processes in start order (teardown stops them in
// reverse: the API server before etcd).
func (cp *ControlPlane) Procs() []*Proc {
	var out []*Proc
	for _, p := range []*Proc{cp.Etcd, cp.APIServer, cp.ControllerManager, cp.Scheduler} {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// Start starts etcd and kube-apiserver, waits for /readyz, then
// kube-controller-manager and kube-scheduler, and waits for the default
// ServiceAccount (Pods need it). On error the processes started so far are
// in the returned ControlPlane, for the caller's teardown.
func Start(ctx context.Context, cfg Config) (*ControlPlane, error) {
	cp := &ControlPlane{}
	p := cfg.PKI
	var err error
	cp.Etcd, err = cfg.start("etcd",
		"--name="+cfg.EtcdName,
		"--data-dir="+filepath.Join(cfg.Dir, "etcd"),
		"--listen-client-urls=http://127.0.0.1:2379",
		"--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380",
		"--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster="+cfg.EtcdName+"=http://127.0.0.1:2380",
		"--unsafe-no-fsync",
		"--log-level=warn",
	)
	if err != nil {
		return cp, err
	}
	bind := cfg.BindAddress
	if bind == "" {
		bind = "0.0.0.0"
	}
	apiArgs := append([]string{
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=" + bind,
		fmt.Sprintf("--secure-port=%d", cfg.APIPort),
		"--advertise-address=" + cfg.AdvertiseAddress,
		"--service-cluster-ip-range=" + cfg.ServiceCIDR,
		"--authorization-mode=" + cfg.AuthorizationMode,
		"--client-ca-file=" + p("ca.crt"),
		"--tls-cert-file=" + p("apiserver.crt"),
		"--tls-private-key-file=" + p("apiserver.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p("sa.key"),
		"--service-account-signing-key-file=" + p("sa.key"),
		"--cert-dir=" + filepath.Join(cfg.Dir, "apiserver"),
		"--profiling=false",
	}, cfg.APIServerArgs...)
	cp.APIServer, err = cfg.start("kube-apiserver", apiArgs...)
	if err != nil {
		return cp, err
	}
	if err := WaitAPIReady(ctx, cfg.Client, cp.Etcd, cp.APIServer); err != nil {
		return cp, fmt.Errorf("%w (see %s)", err, cfg.LogDir)
	}
	kc := p("kcm.kubeconfig")
	cp.ControllerManager, err = cfg.start("kube-controller-manager",
		"--kubeconfig="+kc,
		"--authentication-kubeconfig="+kc,
		"--authorization-kubeconfig="+kc,
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+p("sa.key"),
		"--root-ca-file="+p("ca.crt"),
		"--controllers="+cfg.Controllers,
	)
	if err != nil {
		return cp, err
	}
	kc = p("scheduler.kubeconfig")
	cp.Scheduler, err = cfg.start("kube-scheduler", append([]string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
	}, cfg.SchedulerArgs...)...)
	if err != nil {
		return cp, err
	}
	// The serviceaccount controller creates "default"; Pods need it.
	err = poll.UntilOrAbort(ctx, 60*time.Second, 250*time.Millisecond, func() (bool, string, error) {
		if cp.ControllerManager.Exited() {
			return false, "", errors.New("kube-controller-manager exited")
		}
		_, err := cfg.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err), nil
	})
	if err != nil {
		return cp, fmt.Errorf("default ServiceAccount: %w", err)
	}
	return cp, nil
}

// start starts one control plane binary in the control-plane namespace.
func (cfg Config) start(name string, args ...string) (*Proc, error) {
	return StartProc(cfg.LogDir, name, cfg.Netns, append([]string{cfg.Bin(name)}, args...)...)
}

// WaitAPIReady waits until the API server answers /readyz with ok; it
// gives up early when one of procs (etcd, the API server) exits.
func WaitAPIReady(ctx context.Context, client kubernetes.Interface, procs ...*Proc) error {
	err := poll.UntilOrAbort(ctx, 90*time.Second, 100*time.Millisecond, func() (bool, string, error) {
		for _, p := range procs {
			if p.Exited() {
				return false, "", fmt.Errorf("%s exited", p.Name)
			}
		}
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, fmt.Sprintf("%v %s", err, body), nil
		}
		return string(body) == "ok", string(body), nil
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver /readyz: %w", err)
	}
	return nil
}
