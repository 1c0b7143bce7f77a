//go:build e2enode

package e2enode

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/internal/poll"
)

// TestHelmInstall: `helm install` of deploy/helm/svcproxy with this cluster's
// values (the helm CLI, built by hack/build-helm.sh from the version whose SDK
// renders the chart in make test) makes svcproxy Ready on every node; the
// values reach the process (API server host, cluster CIDR); a change of
// endpoints made after the install is served from every worker, which only a
// running svcproxy does (the table of the install it replaces keeps serving
// what it had); the optional metrics Service leads to every node's metrics.
// `helm uninstall` then leaves none of its objects, and the scenario puts the
// kubectl apply -k install back for the scenarios after it. (The file's name
// puts it after scenarios_test.go, as svcproxy_restart_test.go explains.)
func TestHelmInstall(t *testing.T) {
	bin := os.Getenv("E2ENODE_HELM")
	if bin == "" {
		t.Skip("E2ENODE_HELM is not set (make e2e-node builds helm)")
	}
	c := theCluster
	ctx := context.Background()
	// Whatever happens below, the next scenario finds svcproxy installed with
	// kubectl apply -k and my-nginx at 2 replicas, as the earlier ones leave it.
	t.Cleanup(func() {
		ctx := context.Background()
		if out, err := c.helm(ctx, bin, "status", "svcproxy"); err == nil {
			if out, err := c.helm(ctx, bin, "uninstall", "svcproxy"); err != nil {
				t.Errorf("cleanup: %v: %s", err, out)
			}
		} else {
			c.logf("helm status: %s", out)
		}
		if err := c.waitGone(ctx, "kube-system", svcproxyPods, 2*time.Minute); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if err := c.ensureSvcproxy(ctx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if err := c.ensureSeed(ctx, 2); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	// Registered after the cleanup above, so it runs first: the logs are
	// the Helm release's pods'.
	c.saveProxyLogsOnFailure(t)
	clients := c.clients(t)
	c.svcproxyAndSeed(t, ctx, 2)
	if _, err := c.nginxPods(ctx, 2); err != nil {
		t.Fatal(err)
	}

	// Helm refuses objects it does not own: the kubectl install goes first
	// (its table keeps serving on every node meanwhile).
	overlay, err := c.overlay()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.kubectl(ctx, "delete", "-k", overlay, "--wait=true"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := c.waitGone(ctx, "kube-system", svcproxyPods, 2*time.Minute); err != nil {
		t.Fatal(err)
	}

	// The values a user of this cluster gives, in a values file (a
	// dual-stack cluster-cidr is a list there).
	values, err := yaml.Marshal(map[string]any{
		"host":         c.cp().ip,
		"cluster-cidr": strings.Split(c.clusterCIDRs(), ","),
		"metrics":      map[string]any{"service": map[string]any{"enabled": true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	valuesFile := filepath.Join(c.dir, "helm-values.yaml")
	if err := os.WriteFile(valuesFile, values, 0o644); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(c.cfg.repo, "deploy", "helm", "svcproxy")
	start := time.Now()
	out, err := c.helm(ctx, bin, "install", "svcproxy", chart, "-f", valuesFile)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	installed := time.Since(start)
	pods, err := c.waitDaemonSetReady(ctx, "svcproxy", svcproxyPods, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ready := time.Since(start)
	t.Logf("helm install took %v; svcproxy Ready on %d nodes %v after it began", installed.Round(time.Millisecond), len(pods), ready.Round(time.Millisecond))
	fmt.Printf("METRIC helm_install_to_ready_s=%.2f\n", ready.Seconds())

	ds, err := c.client.AppsV1().DaemonSets("kube-system").Get(ctx, "svcproxy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Labels["app.kubernetes.io/managed-by"] != "Helm" || ds.Annotations["meta.helm.sh/release-name"] != "svcproxy" {
		t.Fatalf("DaemonSet not the Helm release's: labels %v annotations %v", ds.Labels, ds.Annotations)
	}
	// The values reach svcproxy through the chart's ConfigMap.
	for _, n := range c.nodes {
		pid, err := svcproxyPid(n.name)
		if err != nil {
			t.Fatal(err)
		}
		argv, env, err := procArgsEnv(pid)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(argv, "--cluster-cidr="+c.clusterCIDRs()) {
			t.Errorf("%s: svcproxy %q lacks --cluster-cidr=%s", n.name, argv, c.clusterCIDRs())
		}
		if !slices.Contains(env, "KUBERNETES_SERVICE_HOST="+c.cp().ip) {
			t.Errorf("%s: svcproxy's environment lacks KUBERNETES_SERVICE_HOST=%s", n.name, c.cp().ip)
		}
	}

	// Endpoints that exist only since the install: served by its pods.
	if err := c.ensureSeed(ctx, 3); err != nil {
		t.Fatal(err)
	}
	three, err := c.nginxPods(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, client := range clients {
		poll.Eventually(t, 30*time.Second, "my-nginx scaled to 3 from "+client, func() (bool, string) {
			got, failed := answers(client, nginxVIP, 30)
			return sameSet(got, three) && failed == 0, fmt.Sprintf("%v (%d failed), pods %v", got, failed, three)
		})
	}

	c.checkMetricsService(t, ctx)

	if out, err := c.helm(ctx, bin, "uninstall", "svcproxy"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := c.waitGone(ctx, "kube-system", svcproxyPods, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if left := c.helmObjects(ctx); len(left) != 0 {
		t.Errorf("after helm uninstall: %v", left)
	}
}

// helm runs the helm CLI with the admin kubeconfig in the control plane's
// namespace (as kubectl), in kube-system, its own state under the run's
// directory.
func (c *cluster) helm(ctx context.Context, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	home := filepath.Join(c.dir, "helm")
	argv := append([]string{"ip", "netns", "exec", c.cp().netns, bin, "--kubeconfig=" + c.adminKC, "--namespace=kube-system"}, args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	out, err := cmd.CombinedOutput()
	c.logf("helm %s:\n%s", strings.Join(args, " "), strings.TrimSpace(string(out)))
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// helmObjects lists the objects labelled managed-by Helm of the kinds the
// chart makes.
func (c *cluster) helmObjects(ctx context.Context) []string {
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=Helm"}
	var left []string
	add := func(kind string, names []string, err error) {
		if err != nil {
			left = append(left, kind+": "+err.Error())
		}
		for _, n := range names {
			left = append(left, kind+"/"+n)
		}
	}
	dss, err := c.client.AppsV1().DaemonSets("kube-system").List(ctx, sel)
	add("DaemonSet", names(dss.Items, func(i int) string { return dss.Items[i].Name }), err)
	cms, err := c.client.CoreV1().ConfigMaps("kube-system").List(ctx, sel)
	add("ConfigMap", names(cms.Items, func(i int) string { return cms.Items[i].Name }), err)
	sas, err := c.client.CoreV1().ServiceAccounts("kube-system").List(ctx, sel)
	add("ServiceAccount", names(sas.Items, func(i int) string { return sas.Items[i].Name }), err)
	svcs, err := c.client.CoreV1().Services("kube-system").List(ctx, sel)
	add("Service", names(svcs.Items, func(i int) string { return svcs.Items[i].Name }), err)
	crs, err := c.client.RbacV1().ClusterRoles().List(ctx, sel)
	add("ClusterRole", names(crs.Items, func(i int) string { return crs.Items[i].Name }), err)
	crbs, err := c.client.RbacV1().ClusterRoleBindings().List(ctx, sel)
	add("ClusterRoleBinding", names(crbs.Items, func(i int) string { return crbs.Items[i].Name }), err)
	return left
}

func names[T any](items []T, name func(int) string) []string {
	var out []string
	for i := range items {
		out = append(out, name(i))
	}
	return out
}

// checkMetricsService: the chart's svcproxy-metrics Service has an endpoint
// on every node, and each answers /metrics with kube-proxy's metrics.
func (c *cluster) checkMetricsService(t *testing.T, ctx context.Context) {
	t.Helper()
	var addrs []string
	poll.Eventually(t, 30*time.Second, "svcproxy-metrics endpoints on every node", func() (bool, string) {
		list, err := c.client.DiscoveryV1().EndpointSlices("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=svcproxy-metrics"})
		if err != nil {
			return false, err.Error()
		}
		addrs = nil
		for _, s := range list.Items {
			for _, p := range s.Ports {
				if p.Port == nil || *p.Port != 10249 {
					return false, fmt.Sprintf("port %+v", p)
				}
			}
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					addrs = append(addrs, e.Addresses...)
				}
			}
		}
		return len(addrs) == len(c.nodes), fmt.Sprint(addrs)
	})
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: netns.DialFunc(c.cp().netns, 2*time.Second)}}
	for _, a := range addrs {
		resp, err := client.Get("http://" + net.JoinHostPort(a, "10249") + "/metrics")
		if err != nil {
			t.Error(err)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "kubeproxy_sync_proxy_rules_duration_seconds") {
			t.Errorf("%s:10249/metrics: %s, %v, no kubeproxy_sync_proxy_rules_duration_seconds", a, resp.Status, err)
		}
	}
}

// procArgsEnv reads a process' argv and environment.
func procArgsEnv(pid int) (argv, env []string, err error) {
	split := func(b []byte) []string { return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00") }
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, nil, err
	}
	e, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return nil, nil, err
	}
	return split(b), split(e), nil
}
