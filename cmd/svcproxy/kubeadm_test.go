package main

import (
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/pkg/node"
)

const kubeadmNodeName = "svcproxy-worker"

// kubeadmPod is kubeadm's kube-proxy pod laid out under a temp dir: the binary at
// usr/local/bin/kube-proxy, the ConfigMap's files at var/lib/kube-proxy, the service
// account's token and CA at var/run/secrets/kubernetes.io/serviceaccount.
type kubeadmPod struct {
	root string
	args []string // the container's command, $(NODE_NAME) expanded, paths under root
}

// newKubeadmPod reads testdata/kubeadm-kube-proxy.yaml (kubeadm's own output) and
// lays it out. Paths are moved under a temp dir, the one change that cannot be
// avoided outside a container; server, when not empty, replaces the kubeconfig's
// server (svcproxy-control-plane does not resolve here).
func newKubeadmPod(t *testing.T, server string, ca []byte) *kubeadmPod {
	t.Helper()
	data, err := os.ReadFile("testdata/kubeadm-kube-proxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	var ds appsv1.DaemonSet
	for _, doc := range strings.Split(string(data), "\n---\n") {
		switch {
		case strings.Contains(doc, "kind: ConfigMap"):
			if err := yaml.UnmarshalStrict([]byte(doc), &cm); err != nil {
				t.Fatalf("kubeadm ConfigMap: %v", err)
			}
		case strings.Contains(doc, "kind: DaemonSet"):
			if err := yaml.UnmarshalStrict([]byte(doc), &ds); err != nil {
				t.Fatalf("kubeadm DaemonSet: %v", err)
			}
		}
	}
	if cm.Data["config.conf"] == "" || cm.Data["kubeconfig.conf"] == "" || len(ds.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("testdata lacks kubeadm's ConfigMap keys or container: %v", cm.Data)
	}
	c := ds.Spec.Template.Spec.Containers[0]
	p := &kubeadmPod{root: t.TempDir()}
	under := func(path string) string { return filepath.Join(p.root, path) }
	rewrite := strings.NewReplacer(
		"/var/lib/kube-proxy/", under("/var/lib/kube-proxy")+"/",
		"/var/run/secrets/kubernetes.io/serviceaccount/", under("/var/run/secrets/kubernetes.io/serviceaccount")+"/",
	)
	mount := ""
	for _, m := range c.VolumeMounts {
		if m.Name == "kube-proxy" {
			mount = m.MountPath
		}
	}
	if mount != "/var/lib/kube-proxy" {
		t.Fatalf("the ConfigMap is mounted at %q, want /var/lib/kube-proxy", mount)
	}
	kubeconfig := cm.Data["kubeconfig.conf"]
	if server != "" {
		kubeconfig = strings.Replace(kubeconfig, "server: https://svcproxy-control-plane:6443", "server: "+server, 1)
	}
	for path, content := range map[string]string{
		"/var/lib/kube-proxy/config.conf":                      rewrite.Replace(cm.Data["config.conf"]),
		"/var/lib/kube-proxy/kubeconfig.conf":                  rewrite.Replace(kubeconfig),
		"/var/run/secrets/kubernetes.io/serviceaccount/token":  "kubeadm-test-token",
		"/var/run/secrets/kubernetes.io/serviceaccount/ca.crt": string(ca),
	} {
		if err := os.MkdirAll(filepath.Dir(under(path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(under(path), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(under("/usr/local/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(svcproxyBin(t), under(c.Command[0])); err != nil {
		t.Fatal(err)
	}
	// Kubernetes expands $(VAR) from the container's env; NODE_NAME comes from
	// spec.nodeName.
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
			env[e.Name] = kubeadmNodeName
		}
	}
	p.args = append([]string{under(c.Command[0])}, c.Args...)
	for _, a := range c.Command[1:] {
		for name, v := range env {
			a = strings.ReplaceAll(a, "$("+name+")", v)
		}
		p.args = append(p.args, rewrite.Replace(a))
	}
	return p
}

// TestKubeadmDaemonSetConfig runs the built binary as kubeadm's DaemonSet does
// (`/usr/local/bin/kube-proxy --config=... --hostname-override=$(NODE_NAME)`), with
// --write-config-to as a dry run, and checks what it understood; then the same with
// argv[0] svcproxy, which must understand the same.
func TestKubeadmDaemonSetConfig(t *testing.T) {
	p := newKubeadmPod(t, "", nil)
	if filepath.Base(p.args[0]) != "kube-proxy" {
		t.Fatalf("the DaemonSet runs %s, want .../kube-proxy", p.args[0])
	}
	written := map[string][]byte{}
	for _, argv0 := range []string{p.args[0], svcproxyBin(t)} {
		out := filepath.Join(t.TempDir(), "effective.yaml")
		cmd := exec.Command(argv0, append(p.args[1:], "--write-config-to="+out)...)
		log, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", argv0, err, log)
		}
		for _, bad := range []string{"has no effect", "flag ignored", "lenient", "unknown flag"} {
			if strings.Contains(string(log), bad) {
				t.Errorf("%s warned about kubeadm's configuration (%q):\n%s", filepath.Base(argv0), bad, log)
			}
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		written[filepath.Base(argv0)] = b
	}
	if string(written["kube-proxy"]) != string(written["svcproxy"]) {
		t.Errorf("as kube-proxy and as svcproxy the binary understood different things:\n%s\n---\n%s", written["kube-proxy"], written["svcproxy"])
	}
	var cfg kubeproxyconfig.KubeProxyConfiguration
	if err := yaml.UnmarshalStrict(written["kube-proxy"], &cfg); err != nil {
		t.Fatal(err)
	}
	want(t, "hostnameOverride", cfg.HostnameOverride, kubeadmNodeName)
	want(t, "clusterCIDR", cfg.ClusterCIDR, "10.244.0.0/16")
	want(t, "clientConnection.kubeconfig", cfg.ClientConnection.Kubeconfig, filepath.Join(p.root, "/var/lib/kube-proxy/kubeconfig.conf"))
	want(t, "clientConnection.contentType", cfg.ClientConnection.ContentType, "application/vnd.kubernetes.protobuf")
	want(t, "bindAddress", cfg.BindAddress, "0.0.0.0")
	want(t, "healthzBindAddress", cfg.HealthzBindAddress, "0.0.0.0:10256")
	want(t, "metricsBindAddress", cfg.MetricsBindAddress, "127.0.0.1:10249")
	want(t, "mode", string(cfg.Mode), "iptables")
	want(t, "iptables.syncPeriod", cfg.IPTables.SyncPeriod.Duration, 30*time.Second)
	want(t, "iptables.minSyncPeriod", cfg.IPTables.MinSyncPeriod.Duration, time.Second)
	want(t, "configSyncPeriod", cfg.ConfigSyncPeriod.Duration, 15*time.Minute)
	// kubeadm writes minSyncPeriod: 0s, unset: svcproxy spaces syncs by their cost.
	o, err := parseFlags(p.args[1:])
	if err != nil {
		t.Fatal(err)
	}
	want(t, "minSyncPeriodSet", o.MinSyncPeriodSet, false)
}

// TestKubeadmDaemonSetReachesServer runs kubeadm's DaemonSet command for real in a
// node namespace, against a fake API server at the kubeconfig's server, with the
// service account's CA and token where kubeadm's kubeconfig points: it must call
// that server with the token, asking for protobuf, and serve kube-proxy's metrics and
// health addresses.
func TestKubeadmDaemonSetReachesServer(t *testing.T) {
	ns := netnstest.New(t, "kubeadm")
	l, err := ns.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	type request struct{ path, auth, accept, agent string }
	var mu sync.Mutex
	var seen []request
	api := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, request{r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Accept"), r.Header.Get("User-Agent")})
		mu.Unlock()
		http.Error(w, "fake API server", http.StatusServiceUnavailable)
	}))
	api.Listener = l
	api.StartTLS()
	defer api.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw})

	p := newKubeadmPod(t, api.URL, ca)
	logPath := filepath.Join(t.TempDir(), "kube-proxy.log")
	dumpLogOnFailure(t, "kube-proxy (svcproxy)", logPath)
	startProcess(t, ns, logPath, p.args...)

	poll.Eventually(t, 10*time.Second, "a request to the kubeconfig's server", poll.NoError(func() error {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range seen {
			if strings.HasPrefix(r.path, "/api") {
				if r.auth != "Bearer kubeadm-test-token" || r.accept != "application/vnd.kubernetes.protobuf, */*" || r.agent != "svcproxy" {
					return fmt.Errorf("request %+v lacks the token, kube-proxy's Accept or svcproxy's user agent", r)
				}
				return nil
			}
		}
		return fmt.Errorf("requests so far: %+v", seen)
	}))
	client := ns.HTTPClient(time.Second)
	// The fake API server never returns the Node, so /healthz on 10256 starts only
	// once node.Wait has passed, as kube-proxy's does.
	poll.Eventually(t, node.Wait+10*time.Second, "kube-proxy's addresses served", poll.NoError(func() error {
		for url, wantBody := range map[string]string{
			"http://127.0.0.1:10249/proxyMode": "nftables",
			"http://127.0.0.1:10249/healthz":   "ok",
			"http://127.0.0.1:10256/healthz":   "lastUpdated", // 503 until the first sync, which needs the API server
		} {
			resp, err := client.Get(url)
			if err != nil {
				return err
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || !strings.Contains(string(b), wantBody) {
				return fmt.Errorf("%s: %d %q (%v), want %q", url, resp.StatusCode, b, err, wantBody)
			}
		}
		return nil
	}))
}
