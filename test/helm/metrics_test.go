package helm

import (
	"net"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// monitor is the part of a ServiceMonitor or PodMonitor the test reads.
type monitor struct {
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		JobLabel string `json:"jobLabel"`
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints           []endpoint `json:"endpoints"`
		PodMetricsEndpoints []endpoint `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

type endpoint struct {
	Port        string `json:"port"`
	Path        string `json:"path"`
	Relabelings []struct {
		SourceLabels []string `json:"sourceLabels"`
		TargetLabel  string   `json:"targetLabel"`
	} `json:"relabelings"`
}

// TestMetricsObjects: enabled, the Service, ServiceMonitor and PodMonitor
// lead Prometheus to the port svcproxy serves metrics on, on svcproxy's pods
// only, with job="kube-proxy" (as deploy/prometheus/scrape-config.yaml and
// kube-prometheus-stack label it) and a node label; the monitors carry the
// labels a Prometheus' selector asks for.
func TestMetricsObjects(t *testing.T) {
	objs, err := render(map[string]any{"metrics": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus-stack"}},
		"podMonitor":     map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus-stack"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	decode(t, objs["apps/v1/DaemonSet kube-system/svcproxy"], &ds)
	podLabels := labels.Set(ds.Spec.Template.Labels)
	ctr := ds.Spec.Template.Spec.Containers[0]
	metricsPort := 0
	for _, a := range ctr.Args {
		if v, ok := strings.CutPrefix(a, "--metrics-bind-address="); ok {
			_, p, err := net.SplitHostPort(v)
			if err != nil {
				t.Fatal(err)
			}
			metricsPort, _ = strconv.Atoi(p)
		}
	}
	containerPort := func(name string) int {
		for _, p := range ctr.Ports {
			if p.Name == name {
				return int(p.ContainerPort)
			}
		}
		return 0
	}

	var svc corev1.Service
	o, ok := objs["v1/Service kube-system/svcproxy-metrics"]
	if !ok {
		t.Fatalf("no metrics Service: %v", keys(objs))
	}
	decode(t, o, &svc)
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) || svc.Spec.Selector["app.kubernetes.io/name"] != "svcproxy" {
		t.Errorf("Service selects %v: not svcproxy's pods only (%v)", svc.Spec.Selector, podLabels)
	}
	if len(svc.Spec.Ports) != 1 || containerPort(svc.Spec.Ports[0].TargetPort.String()) != metricsPort || metricsPort == 0 {
		t.Fatalf("Service ports %+v: not the metrics port %d", svc.Spec.Ports, metricsPort)
	}

	var sm, pm monitor
	decode(t, objs["monitoring.coreos.com/v1/ServiceMonitor kube-system/svcproxy"], &sm)
	decode(t, objs["monitoring.coreos.com/v1/PodMonitor kube-system/svcproxy"], &pm)
	if !labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(svc.Labels)) {
		t.Errorf("ServiceMonitor selects %v, Service labelled %v", sm.Spec.Selector.MatchLabels, svc.Labels)
	}
	if svc.Labels[sm.Spec.JobLabel] != "kube-proxy" {
		t.Errorf("ServiceMonitor's job: Service label %q = %q, want kube-proxy", sm.Spec.JobLabel, svc.Labels[sm.Spec.JobLabel])
	}
	if !labels.SelectorFromSet(pm.Spec.Selector.MatchLabels).Matches(podLabels) || pm.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != "svcproxy" {
		t.Errorf("PodMonitor selects %v: not svcproxy's pods only (%v)", pm.Spec.Selector.MatchLabels, podLabels)
	}
	if podLabels[pm.Spec.JobLabel] != "kube-proxy" {
		t.Errorf("PodMonitor's job: pod label %q = %q, want kube-proxy", pm.Spec.JobLabel, podLabels[pm.Spec.JobLabel])
	}
	for name, m := range map[string]monitor{"ServiceMonitor": sm, "PodMonitor": pm} {
		if m.Metadata.Labels["release"] != "kube-prometheus-stack" {
			t.Errorf("%s labels %v lack the values' release label", name, m.Metadata.Labels)
		}
		eps := append(m.Spec.Endpoints, m.Spec.PodMetricsEndpoints...)
		if len(eps) != 1 || eps[0].Path != "/metrics" {
			t.Fatalf("%s endpoints %+v", name, eps)
		}
		port := eps[0].Port
		if name == "ServiceMonitor" && port != svc.Spec.Ports[0].Name || name == "PodMonitor" && containerPort(port) != metricsPort {
			t.Errorf("%s scrapes port %q, not the metrics port", name, port)
		}
		rl := eps[0].Relabelings
		if len(rl) != 1 || rl[0].TargetLabel != "node" || len(rl[0].SourceLabels) != 1 || rl[0].SourceLabels[0] != "__meta_kubernetes_pod_node_name" {
			t.Errorf("%s relabelings %+v: want node from __meta_kubernetes_pod_node_name", name, rl)
		}
	}

	// service.enabled alone: the Service without a monitor (no CRD needed).
	objs, err = render(map[string]any{"metrics": map[string]any{"service": map[string]any{"enabled": true}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := objs["v1/Service kube-system/svcproxy-metrics"]; !ok || len(objs) != 6 {
		t.Errorf("metrics.service.enabled: objects %v, want deploy/'s five and the Service", keys(objs))
	}
}
