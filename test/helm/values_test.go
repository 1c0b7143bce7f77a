package helm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// nonDefault sets every value the chart has for the cluster and the pods.
var nonDefault = map[string]any{
	"host":         "192.0.2.10",
	"port":         8443,
	"cluster-cidr": []any{"10.0.0.0/16", "fd00:10::/56"},
	"image":        map[string]any{"repository": "registry.example/svcproxy", "tag": "v1.2.3"},
	"resources": map[string]any{
		"requests": map[string]any{"cpu": "100m", "memory": "96Mi"},
		"limits":   map[string]any{"memory": "128Mi"},
	},
	"tolerations":  []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "proxy", "effect": "NoSchedule"}},
	"nodeSelector": map[string]any{"kubernetes.io/os": "linux"},
}

// overlay is what a kustomize user writes for the same values
// (docs/helm.md, "How the values map to deploy/").
const overlay = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
images:
- name: svcproxy
  newName: registry.example/svcproxy
  newTag: v1.2.3
configMapGenerator:
- name: svcproxy-cluster
  namespace: kube-system
  behavior: merge
  literals:
  - host=192.0.2.10
  - port=8443
  - cluster-cidr=10.0.0.0/16,fd00:10::/56
patches:
- patch: |-
    apiVersion: apps/v1
    kind: DaemonSet
    metadata: {name: svcproxy, namespace: kube-system}
    spec:
      template:
        spec:
          nodeSelector: {kubernetes.io/os: linux}
          tolerations: [{key: dedicated, operator: Equal, value: proxy, effect: NoSchedule}]
          containers:
          - name: svcproxy
            resources:
              requests: {cpu: 100m, memory: 96Mi}
              limits: {memory: 128Mi}
`

// TestNonDefaultValues: every value shows up where svcproxy reads it, and the
// chart still equals deploy/ with the same values set the kustomize way
// (which also checks the ConfigMap's hashed name).
func TestNonDefaultValues(t *testing.T) {
	dir := t.TempDir()
	abs, err := filepath.Abs(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, abs) // kustomize takes bases by relative path only
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(strings.Replace(overlay, "%s", filepath.ToSlash(rel), 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := equalBuild(t, nonDefault, dir)

	var ds appsv1.DaemonSet
	decode(t, objs["apps/v1/DaemonSet kube-system/svcproxy"], &ds)
	pod := ds.Spec.Template.Spec
	ctr := pod.Containers[0]
	if ctr.Image != "registry.example/svcproxy:v1.2.3" {
		t.Errorf("image %q", ctr.Image)
	}
	if got := ctr.Resources.Requests.Cpu().String() + " " + ctr.Resources.Requests.Memory().String() + " " + ctr.Resources.Limits.Memory().String(); got != "100m 96Mi 128Mi" {
		t.Errorf("resources: requests cpu, memory, limits memory = %s", got)
	}
	wantTol := []corev1.Toleration{{Key: "dedicated", Operator: "Equal", Value: "proxy", Effect: "NoSchedule"}}
	if d := cmp.Diff(wantTol, pod.Tolerations); d != "" {
		t.Errorf("tolerations (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"kubernetes.io/os": "linux"}, pod.NodeSelector); d != "" {
		t.Errorf("nodeSelector (-want +got):\n%s", d)
	}

	// The env svcproxy reads, resolved through the ConfigMap it names.
	want := map[string]string{"KUBERNETES_SERVICE_HOST": "192.0.2.10", "KUBERNETES_SERVICE_PORT": "8443", "CLUSTER_CIDR": "10.0.0.0/16,fd00:10::/56"}
	for _, e := range ctr.Env {
		w, ok := want[e.Name]
		if !ok {
			continue
		}
		delete(want, e.Name)
		ref := e.ValueFrom.ConfigMapKeyRef
		o, ok := objs["v1/ConfigMap kube-system/"+ref.Name]
		if !ok {
			t.Errorf("%s: no ConfigMap %s", e.Name, ref.Name)
			continue
		}
		var cm corev1.ConfigMap
		decode(t, o, &cm)
		if cm.Data[ref.Key] != w {
			t.Errorf("%s = %q (ConfigMap %s key %s), want %q", e.Name, cm.Data[ref.Key], ref.Name, ref.Key, w)
		}
	}
	if len(want) != 0 {
		t.Errorf("env lacks %v", want)
	}
}

// TestClusterCIDRString: cluster-cidr as one comma-separated string, as the
// ConfigMap holds it, gives the same ConfigMap as the list.
func TestClusterCIDRString(t *testing.T) {
	vals := map[string]any{}
	for k, v := range nonDefault {
		vals[k] = v
	}
	list, err := render(vals)
	if err != nil {
		t.Fatal(err)
	}
	vals["cluster-cidr"] = "10.0.0.0/16,fd00:10::/56"
	str, err := render(vals)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(keys(list), keys(str)); d != "" {
		t.Errorf("objects (-list +string):\n%s", d)
	}
}

// TestValuesSchema: a misspelt or mistyped value fails the install instead
// of leaving deploy/'s default in place.
func TestValuesSchema(t *testing.T) {
	for _, vals := range []map[string]any{
		{"clusterCIDR": "10.0.0.0/16"},
		{"host": ""},
		{"image": map[string]any{"repo": "x"}},
		{"metrics": map[string]any{"servicemonitor": map[string]any{"enabled": true}}},
	} {
		if _, err := render(vals); err == nil {
			t.Errorf("%v rendered", vals)
		}
	}
}

func decode(t *testing.T, o object, v any) {
	t.Helper()
	b, err := yaml.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}
