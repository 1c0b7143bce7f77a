package deploy_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcproxy/svcproxy/pkg/proxy"
)

// TestGrafanaDashboard checks deploy/grafana/svcproxy.json as Grafana and an
// operator meet it: valid JSON, every panel with a query, each query of the
// kube-proxy job and the instance variable, and every svcproxy_* metric of
// pkg/proxy on some panel, so that a new one is not forgotten. That each query
// returns data from a real Prometheus is test/e2enode's TestKubePrometheusStack.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana/svcproxy.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.UID == "" {
		t.Error("no uid: importing it twice would make two dashboards")
	}
	ids := map[int]bool{}
	var all strings.Builder
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			if !strings.Contains(target.Expr, `job="kube-proxy"`) || !strings.Contains(target.Expr, "$instance") {
				t.Errorf("panel %q: %s: want the kube-proxy job and the $instance variable", p.Title, target.Expr)
			}
			all.WriteString(target.Expr + "\n")
		}
	}
	reg := prometheus.NewRegistry()
	proxy.NewMetrics(reg)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if name := f.GetName(); strings.HasPrefix(name, "svcproxy_") && !strings.Contains(all.String(), name) {
			t.Errorf("metric %s is on no panel", name)
		}
	}
}
