package agent

import (
	"context"
	"fmt"
	"github.com/svcproxy/svcproxy/pkg/config"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/utils/ptr"
	"strings"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
	"github.com/svcproxy/svcproxy/pkg/node"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

// TestServeDualStackManifests: serve on a manifests directory holding a
// dual-stack Service runs one proxy per family on fake kernels, both fed by
// the one manifest watcher; each renders its own family's ClusterIP and
// endpoints and none of the other's.
func TestServeDualStackManifests(t *testing.T) {
	netnstest.RequireRoot(t) // the NodePort address watcher reads a namespace of its own
	ns := netnstest.New(t, "serve6")
	// svcproxy --manifests ../../cmd/svcproxy/testdata/dualstack --hostname-override me --takeover=false
	//   --metrics-bind-address "" --healthz-bind-address "" --oom-score-adj 0
	//   --cluster-cidr 10.244.0.0/16,fd00:244::/56 --sync-period 1h
	o := testOptions(t, func(c *kubeproxyconfig.KubeProxyConfiguration) {
		c.HostnameOverride, c.MetricsBindAddress, c.HealthzBindAddress = "me", "", ""
		c.OOMScoreAdj = ptr.To[int32](0)
		c.ClusterCIDR = "10.244.0.0/16,fd00:244::/56"
		c.IPTables.SyncPeriod.Duration = time.Hour
	}, Options{Manifests: "../../cmd/svcproxy/testdata/dualstack", NoTakeover: true})
	kernels := map[endpoints.Family]*nft.Fake{endpoints.IPv4: nft.NewFake(), endpoints.IPv6: nft.NewFake()}
	started := make(chan familyProxies, 1)
	env := serveEnv{
		kernel:  func(f endpoints.Family) nft.Kernel { return kernels[f] },
		usable:  func(endpoints.Family) error { return nil },
		netNS:   ns.Fd,
		started: func(fps familyProxies) { started <- fps },
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, o, env) }()

	var fps familyProxies
	select {
	case fps = <-started:
	case err := <-done:
		t.Fatalf("serve returned before starting proxies: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no proxies within 10 s")
	}
	if got := fmt.Sprint([]endpoints.Family{fps[0].family, fps[len(fps)-1].family}); len(fps) != 2 || got != "[IPv4 IPv6]" {
		t.Fatalf("%d proxies, families %s; want two, [IPv4 IPv6]", len(fps), got)
	}
	for f, k := range kernels {
		poll.Eventually(t, 10*time.Second, f.String()+" proxy synced", func() (bool, string) {
			return k.Applied() > 0, fmt.Sprintf("%d transactions", k.Applied())
		})
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after cancel")
	}

	// The loops have stopped: their rulesets can be read without a race.
	for _, fp := range fps {
		text := fp.proxy.Desired().Text()
		v4, v6 := []string{"10.96.0.20", "10.96.0.21", "10.244.1.2", "10.244.0.0/16"}, []string{"fd00:96::20", "fd00:244::2", "fd00:244::/56"}
		want, absent := v4, v6
		if fp.family == endpoints.IPv6 {
			want, absent = v6, v4
			if !node.Renders(endpoints.IPv6) {
				// Until pkg/proxy renders ip6 tables its IPv6 ruleset holds no
				// IPv6 elements; the tracker split and the options still show.
				want = []string{"fd00:244::/56"}
			}
		}
		for _, s := range want {
			if !strings.Contains(text, s) {
				t.Errorf("%s proxy's ruleset lacks %s:\n%s", fp.family, s, text)
			}
		}
		for _, s := range absent {
			if strings.Contains(text, s) {
				t.Errorf("%s proxy's ruleset has the other family's %s", fp.family, s)
			}
		}
		// Each tracker holds its own family's ClusterIP and endpoints of web, and
		// only the IPv4 one the single-stack v4only.
		snap, _, _ := fp.tracker.Take()
		web := endpoints.ServicePortName{Namespace: "default", Name: "web", Port: "http", Protocol: "TCP"}
		wantIP, wantEP, wantPorts := "10.96.0.20", "10.244.1.2", 2
		if fp.family == endpoints.IPv6 {
			wantIP, wantEP, wantPorts = "fd00:96::20", "fd00:244::2", 1
		}
		if got := snap.Port(web).ClusterIP.String(); got != wantIP {
			t.Errorf("%s tracker: web's ClusterIP %s, want %s", fp.family, got, wantIP)
		}
		if eps := snap.Endpoints(web); len(eps) != 1 || eps[0].Addr().String() != wantEP {
			t.Errorf("%s tracker: web's endpoints %v, want %s", fp.family, eps, wantEP)
		}
		if snap.PortCount() != wantPorts {
			t.Errorf("%s tracker: %d service ports, want %d", fp.family, snap.PortCount(), wantPorts)
		}
		if node.Renders(endpoints.IPv6) && fp.proxy.Desired().Family != proxy.TableFamily(fp.family) {
			t.Errorf("%s proxy renders table family %s", fp.family, fp.proxy.Desired().Family)
		}
	}
}

// testOptions are the Options cmd/svcproxy resolves from a configuration:
// kube-proxy's defaults changed by set (nil: none), read into o.
func testOptions(t *testing.T, set func(*kubeproxyconfig.KubeProxyConfiguration), o Options) *Options {
	t.Helper()
	cfg := config.Default()
	if set != nil {
		set(cfg)
	}
	if err := o.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return &o
}
