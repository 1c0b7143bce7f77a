package healthcheck

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

// TestBody pins kube-proxy's service health JSON (pkg/proxy/healthcheck,
// service_health.go) byte for byte: load balancers and scripts compare it.
func TestBody(t *testing.T) {
	got := body(endpoints.ServiceKey{Namespace: "default", Name: "web"}, 2, true)
	want := `{
	"service": {
		"namespace": "default",
		"name": "web"
	},
	"localEndpoints": 2,
	"serviceProxyHealthy": true
}`
	if got != want {
		t.Errorf("body:\n%s\nwant:\n%s", got, want)
	}
}

func TestHandler(t *testing.T) {
	svc := endpoints.ServiceKey{Namespace: "default", Name: "web"}
	for _, tc := range []struct {
		name     string
		open     bool
		local    int
		healthy  bool
		wantCode int
		weight   string
	}{
		{name: "local endpoints, proxy healthy", open: true, local: 3, healthy: true, wantCode: 200, weight: "3"},
		{name: "no local endpoints", open: true, local: 0, healthy: true, wantCode: 503, weight: "0"},
		{name: "proxy unhealthy", open: true, local: 3, healthy: false, wantCode: 503, weight: "3"},
		{name: "port being closed", open: false, healthy: true, wantCode: 503, weight: "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{Healthy: func() bool { return tc.healthy }})
			if tc.open {
				s.desired[svc] = Service{NodePort: 30000, LocalEndpoints: tc.local}
				s.instances[svc] = &instance{port: 30000}
			}
			rec := httptest.NewRecorder()
			handler{svc: svc, s: s}.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			if rec.Code != tc.wantCode {
				t.Errorf("code = %d, want %d", rec.Code, tc.wantCode)
			}
			for k, v := range map[string]string{"Content-Type": "application/json", "X-Content-Type-Options": "nosniff", "X-Load-Balancing-Endpoint-Weight": tc.weight} {
				if got := rec.Header().Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if want := body(svc, tc.local, tc.healthy); tc.open && rec.Body.String() != want {
				t.Errorf("body = %s, want %s", rec.Body, want)
			}
		})
	}
}
