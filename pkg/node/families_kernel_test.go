package node

import (
	"strings"
	"testing"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

// TestProbeTable: the IPv6 probe creates `ip6 svcproxy` in the namespace, and
// leaves an existing one (and what is in it) alone.
func TestProbeTable(t *testing.T) {
	ns := netnstest.New(t, "probe6")
	if err := probeTable(endpoints.IPv6, ns.Fd); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if out := ns.MustRun(t, "nft", "list", "tables"); strings.TrimSpace(out) != "table ip6 "+proxy.TableName {
		t.Fatalf("tables after the probe: %q", out)
	}
	ns.MustRun(t, "nft", "add", "chain", "ip6", proxy.TableName, "services")
	if err := probeTable(endpoints.IPv6, ns.Fd); err != nil {
		t.Fatalf("second probe: %v", err)
	}
	if out := ns.MustRun(t, "nft", "list", "table", "ip6", proxy.TableName); !strings.Contains(out, "chain services") {
		t.Fatalf("the probe changed an existing table:\n%s", out)
	}
}
