package install

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRenderOverlayElsewhere: an overlay outside the repository can build on
// deploy/kind and merge a literal into its ConfigMap, as test/e2e's pod
// contract scenario does with the test cluster's API server address.
func TestRenderOverlayElsewhere(t *testing.T) {
	kind, err := filepath.Abs("../../deploy/kind")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// kustomize takes bases by relative path only.
	rel, err := filepath.Rel(dir, kind)
	if err != nil {
		t.Fatal(err)
	}
	k := `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ` + rel + `
configMapGenerator:
- name: svcproxy-cluster
  namespace: kube-system
  behavior: merge
  literals:
  - host=172.18.0.2
`
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := in.DaemonSet()
	if err != nil {
		t.Fatal(err)
	}
	var ref string
	for _, e := range ds.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "KUBERNETES_SERVICE_HOST" {
			ref = e.ValueFrom.ConfigMapKeyRef.Name
		}
	}
	cm, err := in.ConfigMap(ds.Namespace, ref)
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["host"] != "172.18.0.2" || cm.Data["port"] != "6443" {
		t.Errorf("ConfigMap %s data %v, want host 172.18.0.2 port 6443", ref, cm.Data)
	}
}

func TestRenderRejectsUnknownKinds(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"kustomization.yaml": "resources: [svc.yaml]\n",
		"svc.yaml":           "apiVersion: v1\nkind: Service\nmetadata: {name: x}\n",
	}
	for f, c := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Render(dir); err == nil {
		t.Error("a Service in the install rendered without error; the tests would not check it")
	}
}
