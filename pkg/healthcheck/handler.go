package healthcheck

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

// handler answers one Service's health check node port as kube-proxy's does:
// the same status codes, headers and JSON, byte for byte (tab-indented).
type handler struct {
	svc endpoints.ServiceKey
	s   *Server
}

func (h handler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	count, open := h.s.answer(h.svc)
	healthy := h.s.proxyHealthy()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// Weighted load balancers (GCE's WEIGHTED_MAGLEV) spread traffic by it.
	w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(count))
	if open && count > 0 && healthy {
		w.WriteHeader(http.StatusOK)
	} else {
		// kube-proxy writes nothing for a port being closed; a 503 tells a
		// load balancer the same thing more plainly.
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprint(w, body(h.svc, count, healthy))
}

// body is kube-proxy's service health JSON.
func body(svc endpoints.ServiceKey, localEndpoints int, healthy bool) string {
	return fmt.Sprintf("{\n\t\"service\": {\n\t\t\"namespace\": %s,\n\t\t\"name\": %s\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": %t\n}",
		jsonString(svc.Namespace), jsonString(svc.Name), localEndpoints, healthy)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
