package helm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/svcproxy/svcproxy/internal/install"
)

const (
	chartDir  = "../../deploy/helm/svcproxy"
	deployDir = "../../deploy"
	namespace = "kube-system" // where docs/helm.md installs it, as deploy/ does
)

// helmLabels are the labels the chart adds to every object's metadata and deploy/
// has not: the only difference the comparison allows.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

type object = map[string]any

// render renders the chart with the Go SDK as `helm template svcproxy CHART
// -n kube-system` (a client-only install) and returns its objects by key.
func render(vals map[string]any) (map[string]object, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	inst := action.NewInstall(action.NewConfiguration())
	inst.DryRunStrategy = action.DryRunClient
	inst.ReleaseName = "svcproxy"
	inst.Namespace = namespace
	inst.Replace = true // no release store to check the name against
	r, err := inst.Run(ch, vals)
	if err != nil {
		return nil, err
	}
	rel, ok := r.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("release of type %T", r)
	}
	var docs [][]byte
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewBufferString(rel.Manifest)))
	for {
		b, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, b)
	}
	return byKey(docs)
}

// build is the kustomize build of dir as kubectl apply -k makes it
// (internal/install, which deploy/'s own tests use).
func build(dir string) (map[string]object, error) {
	ms, err := install.Manifests(dir)
	if err != nil {
		return nil, err
	}
	var docs [][]byte
	for _, m := range ms {
		docs = append(docs, m.YAML)
	}
	return byKey(docs)
}

func byKey(docs [][]byte) (map[string]object, error) {
	out := map[string]object{}
	for _, d := range docs {
		var o object
		if err := yaml.Unmarshal(d, &o); err != nil {
			return nil, err
		}
		if o == nil { // an empty document: a template that rendered nothing
			continue
		}
		k := key(o)
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s twice", k)
		}
		out[k] = o
	}
	return out, nil
}

func key(o object) string {
	md, _ := o["metadata"].(map[string]any)
	return fmt.Sprintf("%v/%v %v/%v", o["apiVersion"], o["kind"], md["namespace"], md["name"])
}

func keys(m map[string]object) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// withoutHelmLabels checks that o's metadata carries Helm's four labels with
// the chart's values, and returns o without them (and without an emptied
// labels map, as deploy/ writes none there).
func withoutHelmLabels(t *testing.T, o object) object {
	t.Helper()
	md := o["metadata"].(map[string]any)
	labels, _ := md["labels"].(map[string]any)
	want := map[string]any{
		"helm.sh/chart":                "svcproxy-0.1.0",
		"app.kubernetes.io/managed-by": "Helm",
		"app.kubernetes.io/instance":   "svcproxy",
		"app.kubernetes.io/version":    "dev",
	}
	for _, l := range helmLabels {
		if labels[l] != want[l] {
			t.Errorf("%s: label %s=%v, want %v", key(o), l, labels[l], want[l])
		}
		delete(labels, l)
	}
	if labels != nil && len(labels) == 0 {
		delete(md, "labels")
	}
	return o
}

// equalBuild requires the chart rendered with vals to be the kustomize build
// of dir object for object, field for field, but for Helm's labels.
func equalBuild(t *testing.T, vals map[string]any, dir string) map[string]object {
	t.Helper()
	got, err := render(vals)
	if err != nil {
		t.Fatalf("helm: %v", err)
	}
	want, err := build(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(keys(want), keys(got)); d != "" {
		t.Fatalf("objects differ (-kustomize +helm):\n%s", d)
	}
	for k, o := range got {
		if d := cmp.Diff(want[k], withoutHelmLabels(t, o)); d != "" {
			t.Errorf("%s differs (-kustomize +helm):\n%s", k, d)
		}
	}
	return got
}

// TestChartEqualsDeploy: the chart's defaults are deploy/'s, and the value
// deploy/kind/ changes (host) gives deploy/kind/'s build.
func TestChartEqualsDeploy(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		vals map[string]any
	}{
		{".", nil},
		{"kind", map[string]any{"host": "svcproxy-control-plane"}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			got := equalBuild(t, tc.vals, filepath.Join(deployDir, tc.dir))
			if len(got) != 5 { // a build that went wrong on both sides alike compares equal
				t.Errorf("%d objects, want 5: %v", len(got), keys(got))
			}
		})
	}
}
