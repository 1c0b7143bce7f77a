package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeAPIServer answers every request with an empty ServiceList in JSON and
// remembers the Accept and Accept-Encoding headers of the requests it saw.
type fakeAPIServer struct {
	*httptest.Server
	mu        sync.Mutex
	accepts   []string
	encodings []string
}

func newFakeAPIServer(t *testing.T) *fakeAPIServer { return startFakeAPIServer(t, false) }

// startFakeAPIServer starts the fake, serving TLS if asked: client-go's
// transport for plain HTTP is http.DefaultTransport whatever the config asks
// of compression.
func startFakeAPIServer(t *testing.T, tls bool) *fakeAPIServer {
	f := &fakeAPIServer{}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.accepts = append(f.accepts, r.Header.Get("Accept"))
		f.encodings = append(f.encodings, r.Header.Get("Accept-Encoding"))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"ServiceList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
	}))
	if tls {
		f.StartTLS()
	} else {
		f.Start()
	}
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPIServer) lastAccept() string { return f.last(&f.accepts) }

func (f *fakeAPIServer) lastEncoding() string { return f.last(&f.encodings) }

func (f *fakeAPIServer) last(seen *[]string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(*seen) == 0 {
		return ""
	}
	return (*seen)[len(*seen)-1]
}

// TestClusterClientCompression: responses are asked for gzipped, as client-go
// (and so kube-proxy) asks by default, unless the --kubeconfig's cluster sets
// disable-compression (docs/bench.md, "Compression at fleet scale").
func TestClusterClientCompression(t *testing.T) {
	for _, tc := range []struct {
		name    string
		disable bool
		want    string
	}{
		{name: "default: gzip", want: "gzip"},
		{name: "disable-compression", disable: true, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := startFakeAPIServer(t, true)
			ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw}))
			kc := filepath.Join(t.TempDir(), "kubeconfig")
			cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\n    certificate-authority-data: %s\n    disable-compression: %t\n"+
				"contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user: {}\ncurrent-context: c\n", api.URL, ca, tc.disable)
			if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			// As kubeadm's config file names its kubeconfig.
			o := testOptions(t, func(c *kubeproxyconfig.KubeProxyConfiguration) { c.ClientConnection.Kubeconfig = kc }, Options{})
			client, err := clusterClient(o)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := client.core.Services("").List(context.Background(), metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			}
			if got := api.lastEncoding(); got != tc.want {
				t.Errorf("Accept-Encoding %q, want %q", got, tc.want)
			}
		})
	}
}

// TestClusterClientContentTypes: the client asks for protobuf by default, as
// kube-proxy's clientConnection.contentType default does, and follows the file.
func TestClusterClientContentTypes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		set        func(*kubeproxyconfig.KubeProxyConfiguration) // clientConnection as in the file
		wantAccept string
	}{
		{name: "default: protobuf", wantAccept: "application/vnd.kubernetes.protobuf, */*"},
		{name: "contentType json", set: func(c *kubeproxyconfig.KubeProxyConfiguration) { c.ClientConnection.ContentType = "application/json" },
			wantAccept: "application/json, */*"},
		{name: "acceptContentTypes wins", set: func(c *kubeproxyconfig.KubeProxyConfiguration) {
			c.ClientConnection.AcceptContentTypes = "application/json"
		},
			wantAccept: "application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPIServer(t)
			o := testOptions(t, tc.set, Options{Master: api.URL})
			client, err := clusterClient(o)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := client.core.Services("").List(context.Background(), metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			}
			if got := api.lastAccept(); got != tc.wantAccept {
				t.Errorf("Accept %q, want %q", got, tc.wantAccept)
			}
		})
	}
}

// TestMetricsAddressEndpoints: the metrics address serves what kube-proxy's does:
// /metrics with component-base's metrics next to ours (each family once),
// /proxyMode, /configz, /healthz, and /debug/pprof only with enableProfiling.
func TestMetricsAddressEndpoints(t *testing.T) {
	api := newFakeAPIServer(t)
	o := testOptions(t, func(c *kubeproxyconfig.KubeProxyConfiguration) {
		c.Mode, c.ClusterCIDR, c.EnableProfiling = "iptables", "10.244.0.0/16", true
	}, Options{Master: api.URL})
	// A request through client-go, so that the rest_client_* metrics have a sample.
	client, err := clusterClient(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.core.Services("").List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	own := prometheus.NewCounter(prometheus.CounterOpts{Name: "svcproxy_test_total", Help: "A metric of our own registry."})
	reg.MustRegister(own)
	h, err := metricsHandler(reg, o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	code, body, header := get(t, srv.URL+"/proxyMode")
	if code != 200 || body != "nftables" || header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("/proxyMode: %d %q %q, want 200 \"nftables\" text/plain", code, body, header.Get("Content-Type"))
	}

	code, body, _ = get(t, srv.URL+"/configz")
	var configz map[string]struct {
		Kind        string `json:"kind"`
		ClusterCIDR string `json:"clusterCIDR"`
		Mode        string `json:"mode"`
	}
	if err := json.Unmarshal([]byte(body), &configz); err != nil || code != 200 {
		t.Fatalf("/configz: %d %q: %v", code, body, err)
	}
	if c := configz["kubeproxy.config.k8s.io"]; c.Kind != "KubeProxyConfiguration" || c.ClusterCIDR != "10.244.0.0/16" || c.Mode != "iptables" {
		t.Errorf("/configz: %+v, want the effective KubeProxyConfiguration", configz)
	}

	if code, _, _ := get(t, srv.URL+"/healthz"); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
	if code, _, _ := get(t, srv.URL+"/debug/pprof/"); code != 200 {
		t.Errorf("/debug/pprof/ with enableProfiling: %d", code)
	}

	code, body, _ = get(t, srv.URL+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	for _, name := range []string{"svcproxy_test_total", "kubernetes_build_info", "rest_client_requests_total", "rest_client_request_duration_seconds", "go_goroutines", "process_start_time_seconds"} {
		if n := strings.Count(body, "# TYPE "+name+" "); n != 1 {
			t.Errorf("/metrics has %d families %s, want 1", n, name)
		}
	}
}

func TestProfilingOffByDefault(t *testing.T) {
	o := testOptions(t, nil, Options{})
	h, err := metricsHandler(prometheus.NewRegistry(), o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	if code, _, _ := get(t, srv.URL+"/debug/pprof/"); code != 404 {
		t.Errorf("/debug/pprof/ without enableProfiling: %d, want 404", code)
	}
}

func get(t *testing.T, url string) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}
