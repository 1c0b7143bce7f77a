// Package install renders svcproxy's install (the kustomizations in deploy/)
// as `kubectl apply -k` would and decodes it into typed objects, for the tests
// that check the manifests and for the e2e scenario that runs svcproxy exactly
// as its DaemonSet would. It is not part of the svcproxy binary.
package install

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Install is what one kustomization renders to.
type Install struct {
	ServiceAccounts     []corev1.ServiceAccount
	ClusterRoles        []rbacv1.ClusterRole
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
	DaemonSets          []appsv1.DaemonSet
	ConfigMaps          []corev1.ConfigMap
}

// Render builds the kustomization in dir (a directory on disk) with kubectl's
// defaults and decodes every object; an object of another kind is an error, so
// that nothing the install creates goes unchecked.
func Render(dir string) (*Install, error) {
	docs, err := Manifests(dir)
	if err != nil {
		return nil, err
	}
	out := &Install{}
	for _, d := range docs {
		if err := out.add(d.Kind, d.YAML); err != nil {
			return nil, fmt.Errorf("%s: %w", d.ID, err)
		}
	}
	return out, nil
}

// Manifest is one object of a kustomize build, as kubectl apply -k sends it.
type Manifest struct {
	Kind, ID string // ID names the object in errors
	YAML     []byte
}

// Manifests builds the kustomization in dir with kubectl's defaults and
// returns its objects undecoded, whatever their kinds: for test/helm, which
// compares the Helm chart with this build field for field.
func Manifests(dir string) ([]Manifest, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	var out []Manifest
	for _, r := range m.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.CurId(), err)
		}
		out = append(out, Manifest{Kind: r.GetKind(), ID: r.CurId().String(), YAML: b})
	}
	return out, nil
}

func (in *Install) add(kind string, b []byte) error {
	var err error
	switch kind {
	case "ServiceAccount":
		in.ServiceAccounts, err = decodeAppend(in.ServiceAccounts, b)
	case "ClusterRole":
		in.ClusterRoles, err = decodeAppend(in.ClusterRoles, b)
	case "ClusterRoleBinding":
		in.ClusterRoleBindings, err = decodeAppend(in.ClusterRoleBindings, b)
	case "DaemonSet":
		in.DaemonSets, err = decodeAppend(in.DaemonSets, b)
	case "ConfigMap":
		in.ConfigMaps, err = decodeAppend(in.ConfigMaps, b)
	default:
		return fmt.Errorf("unexpected kind %q in the install", kind)
	}
	return err
}

func decodeAppend[T any](list []T, b []byte) ([]T, error) {
	var v T
	if err := yaml.UnmarshalStrict(b, &v); err != nil {
		return list, fmt.Errorf("decode: %w", err)
	}
	return append(list, v), nil
}

// DaemonSet returns the one DaemonSet of the install.
func (in *Install) DaemonSet() (*appsv1.DaemonSet, error) {
	if len(in.DaemonSets) != 1 {
		return nil, fmt.Errorf("want one DaemonSet, the install has %d", len(in.DaemonSets))
	}
	return &in.DaemonSets[0], nil
}

// ConfigMap returns the ConfigMap namespace/name (after kustomize's renaming).
func (in *Install) ConfigMap(namespace, name string) (*corev1.ConfigMap, error) {
	for i := range in.ConfigMaps {
		if cm := &in.ConfigMaps[i]; cm.Namespace == namespace && cm.Name == name {
			return cm, nil
		}
	}
	return nil, fmt.Errorf("no ConfigMap %s/%s in the install", namespace, name)
}
