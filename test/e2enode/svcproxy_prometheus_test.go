//go:build e2enode

package e2enode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/internal/promtest"
)

// TestKubePrometheusStack: operators who scrape kube-proxy change nothing after
// the swap. A real Prometheus discovers the node proxy through the API
// server (Prometheus v3, built by hack/build-prometheus.sh), once as
// kube-prometheus-stack sets it up (the chart's kube-proxy Service,
// its ServiceMonitor as the operator turns it into a scrape job) and once with
// deploy/prometheus/scrape-config.yaml; each time every query of the
// kubernetes-mixin's Proxy dashboard returns data, with a series per node where
// the panel has one, and the KubeProxyDown alert's expression is empty; every
// panel of deploy/grafana/svcproxy.json has data too.
func TestKubePrometheusStack(t *testing.T) {
	// Debian's Prometheus has no Kubernetes discovery: hack/build-prometheus.sh
	// builds one from the pinned module.
	bin := os.Getenv("E2ENODE_PROMETHEUS")
	if bin == "" {
		t.Skip("E2ENODE_PROMETHEUS is not set (make e2e-node builds Prometheus)")
	}
	c := theCluster
	ctx := context.Background()
	c.saveProxyLogsOnFailure(t)
	c.svcproxyAndSeed(t, ctx, 2)
	svc := filepath.Join(c.cfg.repo, "test", "e2enode", "testdata", "kube-prometheus-stack-kube-proxy.yaml")
	if out, err := c.kubectl(ctx, "apply", "-f", svc); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = c.kubectl(context.Background(), "delete", "-f", svc) })

	shipped, err := os.ReadFile(filepath.Join(c.cfg.repo, "deploy", "prometheus", "scrape-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct{ name, config string }{
		{"kube-prometheus-stack", operatorScrapeConfig},
		{"deploy-prometheus", string(shipped)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			config, err := withKubeconfig(tc.config, c.adminKC)
			if err != nil {
				t.Fatal(err)
			}
			query := c.startPrometheus(t, bin, tc.name, fmt.Sprintf("127.0.0.1:%d", 9091+i), config)
			c.checkProxyDashboard(t, ctx, query)
			if i == 0 {
				checkGrafanaDashboard(t, filepath.Join(c.cfg.repo, "deploy", "grafana", "svcproxy.json"), query)
			}
		})
	}
}

// operatorScrapeConfig is what the Prometheus Operator makes of
// kube-prometheus-stack's kube-proxy ServiceMonitor (endpoints of the Services
// labelled app=kube-prometheus-stack-kube-proxy and release=kube-prometheus-stack,
// port http-metrics, jobLabel: jobLabel), in the operator's own relabelling.
const operatorScrapeConfig = `scrape_configs:
- job_name: serviceMonitor/monitoring/kube-prometheus-stack-kube-proxy/0
  kubernetes_sd_configs:
  - role: endpoints
    namespaces:
      names: [kube-system]
  relabel_configs:
  - {source_labels: [job], target_label: __tmp_prometheus_job_name}
  - {action: keep, source_labels: [__meta_kubernetes_service_label_app, __meta_kubernetes_service_labelpresent_app], regex: '(kube-prometheus-stack-kube-proxy);true'}
  - {action: keep, source_labels: [__meta_kubernetes_service_label_release, __meta_kubernetes_service_labelpresent_release], regex: '(kube-prometheus-stack);true'}
  - {action: keep, source_labels: [__meta_kubernetes_endpoint_port_name], regex: http-metrics}
  - {source_labels: [__meta_kubernetes_endpoint_address_target_kind, __meta_kubernetes_endpoint_address_target_name], separator: ';', regex: 'Node;(.*)', replacement: '${1}', target_label: node}
  - {source_labels: [__meta_kubernetes_endpoint_address_target_kind, __meta_kubernetes_endpoint_address_target_name], separator: ';', regex: 'Pod;(.*)', replacement: '${1}', target_label: pod}
  - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
  - {source_labels: [__meta_kubernetes_service_name], target_label: service}
  - {source_labels: [__meta_kubernetes_pod_name], target_label: pod}
  - {source_labels: [__meta_kubernetes_pod_container_name], target_label: container}
  - {source_labels: [__meta_kubernetes_service_name], target_label: job, replacement: '${1}'}
  - {source_labels: [__meta_kubernetes_service_label_jobLabel], regex: '(.+)', target_label: job, replacement: '${1}'}
  - {target_label: endpoint, replacement: http-metrics}
`

// withKubeconfig is a whole prometheus.yml: a one-second scrape interval (a test
// sees data within seconds) and config's scrape jobs, each Kubernetes discovery
// reaching the API server with kubeconfig (in a pod, Prometheus uses its
// ServiceAccount's token instead).
func withKubeconfig(config, kubeconfig string) (string, error) {
	var doc struct {
		ScrapeConfigs []map[string]any `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal([]byte(config), &doc); err != nil {
		return "", err
	}
	if len(doc.ScrapeConfigs) == 0 {
		return "", fmt.Errorf("no scrape_configs in %q", config)
	}
	for _, job := range doc.ScrapeConfigs {
		sds, _ := job["kubernetes_sd_configs"].([]any)
		if len(sds) == 0 {
			return "", fmt.Errorf("job %v discovers nothing through the API server", job["job_name"])
		}
		for _, sd := range sds {
			sd.(map[string]any)["kubeconfig_file"] = kubeconfig
		}
	}
	out, err := yaml.Marshal(map[string]any{
		"global":         map[string]string{"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
		"scrape_configs": doc.ScrapeConfigs,
	})
	return string(out), err
}

// startPrometheus runs Prometheus in the control plane node with config, its API
// on addr, until the test ends.
func (c *cluster) startPrometheus(t *testing.T, bin, name, addr, config string) func(string) ([]promtest.Sample, error) {
	t.Helper()
	dir := filepath.Join(c.dir, "prometheus-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := c.start("prometheus-"+name, c.cp().netns, bin, "--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+addr, "--log.level=warn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(10 * time.Second) })
	return promtest.QueryVia(netns.DialFunc(c.cp().netns, 2*time.Second), addr)
}

// proxyDashboard are the queries of the kubernetes-mixin's Proxy dashboard
// (dashboards/proxy.libsonnet) with its $cluster and $instance selectors left
// out, and whether the panel has a series per node.
var proxyDashboard = []struct {
	query   string
	perNode bool
	// mayBeEmpty, when set, is why svcproxy may leave this panel without data
	// (docs/metrics.md); the panel is then not required to have any.
	mayBeEmpty string
}{
	{`sum(up{job="kube-proxy"})`, false, ""},
	{`sum(rate(kubeproxy_sync_proxy_rules_duration_seconds_count{job="kube-proxy"}[5m]))`, false, ""},
	{`sum(rate(kubeproxy_network_programming_duration_seconds_count{job="kube-proxy"}[5m]))`, false, ""},
	{`histogram_quantile(0.99, rate(kubeproxy_sync_proxy_rules_duration_seconds_bucket{job="kube-proxy"}[5m]))`, true, ""},
	{`histogram_quantile(0.99, sum(rate(kubeproxy_network_programming_duration_seconds_bucket{job="kube-proxy"}[5m])) by (instance, le))`, true, ""},
	{`sum(rate(rest_client_requests_total{job="kube-proxy",code=~"2.."}[5m]))`, false, ""},
	{`sum(rate(rest_client_requests_total{job="kube-proxy"}[5m])) by (code)`, false, ""},
	{`histogram_quantile(0.99, sum(rate(rest_client_request_duration_seconds_bucket{job="kube-proxy",verb="POST"}[5m])) by (verb, url, le))`, false, ""},
	{`histogram_quantile(0.99, sum(rate(rest_client_request_duration_seconds_bucket{job="kube-proxy",verb="GET"}[5m])) by (verb, url, le))`, false,
		"svcproxy reads the API server mostly through watch-list informers, its Node's included, where kube-proxy GETs its Node at start"},
	{`process_resident_memory_bytes{job="kube-proxy"}`, true, ""},
	{`rate(process_cpu_seconds_total{job="kube-proxy"}[5m])`, true, ""},
	{`go_goroutines{job="kube-proxy"}`, true, ""},
}

// checkProxyDashboard waits until Prometheus scrapes the proxy on every node as
// job kube-proxy, makes endpoint changes for the programming latency panels,
// then requires every dashboard query to return data and KubeProxyDown to be
// quiet.
func (c *cluster) checkProxyDashboard(t *testing.T, ctx context.Context, query func(string) ([]promtest.Sample, error)) {
	t.Helper()
	poll.Eventually(t, 90*time.Second, `up{job="kube-proxy"} == 1 on every node`, poll.NoError(func() error {
		up, err := query(`up{job="kube-proxy"} == 1`)
		if err != nil {
			return err
		}
		if len(up) != len(c.nodes) {
			return fmt.Errorf("%d of %d nodes' proxies up: %v", len(up), len(c.nodes), up)
		}
		return nil
	}))
	// Endpoint changes, stamped by the EndpointSlice controller, for
	// kubeproxy_network_programming_duration_seconds.
	for _, replicas := range []int32{3, 2} {
		if err := c.scaleNginx(ctx, replicas); err != nil {
			t.Fatal(err)
		}
		if _, err := c.nginxPods(ctx, int(replicas)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range proxyDashboard {
		if p.mayBeEmpty != "" {
			got, err := query(p.query)
			t.Logf("%s: %v, %v (may be empty: %s)", p.query, got, err, p.mayBeEmpty)
			continue
		}
		poll.Eventually(t, 60*time.Second, p.query, poll.NoError(func() error {
			got, err := query(p.query)
			if err != nil {
				return err
			}
			if len(got) == 0 {
				return fmt.Errorf("no data")
			}
			if p.perNode {
				if nodes := instances(got); len(nodes) != len(c.nodes) {
					return fmt.Errorf("series for %d of %d nodes: %v", len(nodes), len(c.nodes), got)
				}
			}
			return nil
		}))
	}
	if down, err := query(`absent(up{job="kube-proxy"} == 1)`); err != nil || len(down) != 0 {
		t.Errorf("KubeProxyDown's expression: %v, %v; want no result", down, err)
	}
}

// instances lists the distinct instance labels of samples.
func instances(samples []promtest.Sample) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range samples {
		if i := s.Labels["instance"]; !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	return out
}

// checkGrafanaDashboard runs the query of every panel of the dashboard at path,
// with its variables set to all instances and a one-minute rate window, and
// requires data from each.
func checkGrafanaDashboard(t *testing.T, path string, query func(string) ([]promtest.Sample, error)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	vars := strings.NewReplacer("$instance", ".*", "$__rate_interval", "1m")
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			q := vars.Replace(target.Expr)
			poll.Eventually(t, 30*time.Second, fmt.Sprintf("panel %q: %s", p.Title, q), poll.NoError(func() error {
				got, err := query(q)
				if err == nil && len(got) == 0 {
					err = fmt.Errorf("no data")
				}
				return err
			}))
		}
	}
}
