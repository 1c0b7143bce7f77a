package healthcheck

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

// TestListenFailuresMetric: the counter is registered under its name at 0, and a
// port that cannot be opened counts once per Service, port and error, not on
// every retry.
func TestListenFailuresMetric(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	s := New(Config{
		ListenFailures: NewListenFailures(reg),
		Listen:         func(string, string) (net.Listener, error) { return nil, errors.New("address already in use") },
	})
	defer s.Close()
	want := func(n int) {
		t.Helper()
		exp := "# HELP svcproxy_healthcheck_nodeport_listen_failures_total Health check node ports of externalTrafficPolicy: Local Services that could not be opened (each Service, port and error once; retried every sync).\n" +
			"# TYPE svcproxy_healthcheck_nodeport_listen_failures_total counter\n" +
			"svcproxy_healthcheck_nodeport_listen_failures_total " + strconv.Itoa(n) + "\n"
		if err := testutil.GatherAndCompare(reg, strings.NewReader(exp)); err != nil {
			t.Error(err)
		}
	}
	want(0)
	web := map[endpoints.ServiceKey]Service{{Namespace: "default", Name: "web"}: {NodePort: 31001}}
	s.Sync(web)
	s.Sync(web)
	want(1)
}
