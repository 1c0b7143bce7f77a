package healthcheck

import (
	"net"
	"testing"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

// TestClosedPortIsFreeAtOnce: SetAddresses closes a Service's listeners and
// reopens the port on other addresses straight away, so close must free the port
// before it returns, even when the server's goroutine has not started serving yet.
func TestClosedPortIsFreeAtOnce(t *testing.T) {
	s := New(Config{})
	s.binds = []bind{{network: "tcp4", host: "127.0.0.1"}}
	for i := range 50 {
		inst, err := s.open(endpoints.ServiceKey{Namespace: "default", Name: "web"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(inst.addrs()[0])
		inst.close()
		l, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", port))
		if err != nil {
			t.Fatalf("round %d: port %s still taken after close: %v", i, port, err)
		}
		l.Close()
	}
}
