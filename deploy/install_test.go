package deploy_test

import (
	"net"
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/svcproxy/svcproxy/internal/install"
)

// TestInstall renders deploy/ and deploy/kind/ as `kubectl apply -k` does and
// checks what a cluster needs from them. That svcproxy actually starts and
// serves with these manifests is test/e2e's TestPodContract.
func TestInstall(t *testing.T) {
	for _, tc := range []struct {
		dir, host, image string
	}{
		{dir: ".", host: "kind-control-plane", image: "svcproxy:dev"},
		{dir: "kind", host: "svcproxy-control-plane", image: "svcproxy:dev"},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			in, err := install.Render(tc.dir)
			if err != nil {
				t.Fatal(err)
			}
			ds, err := in.DaemonSet()
			if err != nil {
				t.Fatal(err)
			}
			if ds.Namespace != "kube-system" {
				t.Errorf("DaemonSet namespace %q, want kube-system", ds.Namespace)
			}
			pod := ds.Spec.Template
			if len(pod.Spec.Containers) != 1 {
				t.Fatalf("want one container, have %d", len(pod.Spec.Containers))
			}
			ctr := pod.Spec.Containers[0]
			if ctr.Image != tc.image {
				t.Errorf("image %q, want %q", ctr.Image, tc.image)
			}
			if len(ctr.Command) != 0 {
				t.Errorf("command %q overrides the image's entrypoint", ctr.Command)
			}
			if !pod.Spec.HostNetwork {
				t.Error("not hostNetwork: svcproxy programs the node's network namespace")
			}
			// The node's sysctls: writable where --sysctl-dir says.
			if !slices.Contains(ctr.Args, "--sysctl-dir=/host/proc/sys") {
				t.Errorf("args %q lack --sysctl-dir=/host/proc/sys", ctr.Args)
			}
			mounted := false
			for _, m := range ctr.VolumeMounts {
				for _, v := range pod.Spec.Volumes {
					if v.Name == m.Name && m.MountPath == "/host/proc/sys/net" && !m.ReadOnly && v.HostPath != nil && v.HostPath.Path == "/proc/sys/net" {
						mounted = true
					}
				}
			}
			if !mounted {
				t.Error("the node's /proc/sys/net is not mounted writable at /host/proc/sys/net")
			}

			// The API server by its real address, never the kubernetes Service.
			env := envFrom(t, in, ds.Namespace, ctr.Env)
			if got := env["KUBERNETES_SERVICE_HOST"]; got != tc.host {
				t.Errorf("KUBERNETES_SERVICE_HOST = %q, want %q", got, tc.host)
			}
			if got := env["KUBERNETES_SERVICE_PORT"]; got != "6443" {
				t.Errorf("KUBERNETES_SERVICE_PORT = %q, want 6443", got)
			}
			if !slices.Contains(ctr.Args, "--hostname-override=$(NODE_NAME)") || env["NODE_NAME"] != "fieldRef:spec.nodeName" {
				t.Errorf("node name not from spec.nodeName: args %q, NODE_NAME %q", ctr.Args, env["NODE_NAME"])
			}

			// Prometheus scrapes the port svcproxy serves metrics on, on an
			// address reachable from outside the node.
			a := pod.Annotations
			metrics := flagValue(ctr.Args, "--metrics-bind-address")
			host, port, err := net.SplitHostPort(metrics)
			if err != nil || host != "0.0.0.0" {
				t.Errorf("--metrics-bind-address=%q, want 0.0.0.0:PORT (%v)", metrics, err)
			}
			if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != port || a["prometheus.io/path"] != "/metrics" {
				t.Errorf("scrape annotations %v do not match metrics address %q", a, metrics)
			}

			sc := ctr.SecurityContext
			if sc == nil || sc.Capabilities == nil || sc.Privileged != nil && *sc.Privileged {
				t.Fatalf("securityContext %+v: want explicit capabilities, not privileged", sc)
			}
			if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN"}) {
				t.Errorf("capabilities %+v, want drop ALL, add NET_ADMIN", sc.Capabilities)
			}

			checkRBAC(t, in, ds.Namespace, pod.Spec.ServiceAccountName)
		})
	}
}

// envFrom resolves the container's env as far as the manifests allow:
// literal values, ConfigMap keys, and "fieldRef:PATH" for downward API fields.
func envFrom(t *testing.T, in *install.Install, namespace string, env []corev1.EnvVar) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range env {
		switch {
		case e.ValueFrom == nil:
			out[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			out[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm, err := in.ConfigMap(namespace, ref.Name)
			if err != nil {
				t.Fatalf("env %s: %v", e.Name, err)
			}
			v, ok := cm.Data[ref.Key]
			if !ok {
				t.Fatalf("env %s: ConfigMap %s has no key %q", e.Name, ref.Name, ref.Key)
			}
			out[e.Name] = v
		default:
			t.Fatalf("env %s: unexpected source %+v", e.Name, e.ValueFrom)
		}
	}
	return out
}

func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// checkRBAC: the ServiceAccount exists and is bound to exactly the rights
// svcproxy uses (see rbac.yaml), nothing more.
func checkRBAC(t *testing.T, in *install.Install, namespace, sa string) {
	t.Helper()
	if sa == "" || len(in.ServiceAccounts) != 1 || in.ServiceAccounts[0].Name != sa || in.ServiceAccounts[0].Namespace != namespace {
		t.Fatalf("pod's ServiceAccount %q: install has %+v", sa, in.ServiceAccounts)
	}
	if len(in.ClusterRoles) != 1 || len(in.ClusterRoleBindings) != 1 {
		t.Fatalf("want one ClusterRole and one binding, have %d and %d", len(in.ClusterRoles), len(in.ClusterRoleBindings))
	}
	role, b := in.ClusterRoles[0], in.ClusterRoleBindings[0]
	if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != role.Name ||
		len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != sa || b.Subjects[0].Namespace != namespace {
		t.Errorf("binding %+v does not bind ClusterRole %s to %s/%s", b, role.Name, namespace, sa)
	}
	var got []string
	for _, r := range role.Rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("unexpected rule %+v", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					got = append(got, g+"/"+res+" "+v)
				}
			}
		}
	}
	slices.Sort(got)
	want := []string{
		"/events create", "/events patch", // client-go's event broadcaster: new Events, then repeats
		"/nodes list", "/nodes watch", // this node's Node, for nodeEligible
		"events.k8s.io/events create", "events.k8s.io/events patch", // the start-up Event on the Node
		"/services list", "/services watch", // informers
		"discovery.k8s.io/endpointslices list", "discovery.k8s.io/endpointslices watch",
		"networking.k8s.io/servicecidrs list", "networking.k8s.io/servicecidrs watch", // drops for unallocated service addresses
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("ClusterRole grants\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestKindCluster: the kind cluster has no kube-proxy, and its control plane
// is the host the kind overlay points svcproxy at.
func TestKindCluster(t *testing.T) {
	b, err := os.ReadFile("kind/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Kind       string `json:"kind"`
		Name       string `json:"name"`
		Networking struct {
			KubeProxyMode string `json:"kubeProxyMode"`
		} `json:"networking"`
		Nodes []struct {
			Role string `json:"role"`
		} `json:"nodes"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Kind != "Cluster" || cfg.Networking.KubeProxyMode != "none" {
		t.Errorf("kind config: kind %q, kubeProxyMode %q; want Cluster, none", cfg.Kind, cfg.Networking.KubeProxyMode)
	}
	workers := 0
	for _, n := range cfg.Nodes {
		if n.Role == "worker" {
			workers++
		}
	}
	if workers == 0 {
		t.Error("kind config has no worker: nothing shows traffic between nodes")
	}
	in, err := install.Render("kind")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := in.DaemonSet()
	if err != nil {
		t.Fatal(err)
	}
	env := envFrom(t, in, ds.Namespace, ds.Spec.Template.Spec.Containers[0].Env)
	if want := cfg.Name + "-control-plane"; env["KUBERNETES_SERVICE_HOST"] != want {
		t.Errorf("overlay points at %q; cluster %q's control plane is %q", env["KUBERNETES_SERVICE_HOST"], cfg.Name, want)
	}
}
