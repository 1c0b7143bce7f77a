package main

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/node"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

// TestCleanupBothFamilies: --cleanup deletes svcproxy's ip and ip6 tables and
// anchor tables, and nothing else.
func TestCleanupBothFamilies(t *testing.T) {
	bin := svcproxyBin(t)
	node := netnstest.New(t, "cleanup6")
	for _, fam := range []string{"ip", "ip6"} {
		node.MustRun(t, "nft", "add", "table", fam, proxy.TableName)
		node.MustRun(t, "nft", "add", "table", fam, proxy.AnchorTableName)
		node.MustRun(t, "nft", "add", "table", fam, "bystander")
	}
	if out, err := node.Run(bin, "--cleanup", "--takeover=false"); err != nil {
		t.Fatalf("--cleanup: %v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(node.MustRun(t, "nft", "list", "tables")), "\n")
	sort.Strings(lines)
	if got := strings.Join(lines, "|"); got != "table ip bystander|table ip6 bystander" {
		t.Fatalf("tables after --cleanup: %q", got)
	}
}

// TestDualStackNode runs the binary on the dual-stack manifests in a namespace:
// both tables are programmed, each with its own family's ClusterIP.
func TestDualStackNode(t *testing.T) {
	if !node.Renders(endpoints.IPv6) {
		t.Skip("pkg/proxy renders no ip6 table in this build (wip/v6core)")
	}
	node := netnstest.New(t, "dual")
	logPath := filepath.Join(t.TempDir(), "svcproxy.log")
	dumpLogOnFailure(t, "svcproxy", logPath)
	startSvcproxy(t, node, logPath, "--manifests", "testdata/dualstack", "--hostname-override", "me",
		"--cluster-cidr", "10.244.0.0/16,fd00:244::/56",
		"--metrics-bind-address", metricsAddr, "--healthz-bind-address", healthzAddr)
	for _, tc := range []struct{ family, has, lacks string }{
		{"ip", "10.96.0.20", "fd00:96::20"},
		{"ip6", "fd00:96::20", "10.96.0.20"},
	} {
		poll.Eventually(t, 15*time.Second, "table "+tc.family+" with "+tc.has, func() (bool, string) {
			out, err := node.Run("nft", "list", "table", tc.family, proxy.TableName)
			return err == nil && strings.Contains(out, tc.has) && !strings.Contains(out, tc.lacks), out
		})
	}
	c, err := nftables.New(nftables.WithNetNSFd(node.Fd))
	if err != nil {
		t.Fatal(err)
	}
	tables, err := c.ListTables()
	var names []string
	for _, tb := range tables {
		names = append(names, fmt.Sprintf("%d %s", tb.Family, tb.Name))
	}
	sort.Strings(names)
	if want := "10 svcproxy|10 svcproxy-anchor|2 svcproxy|2 svcproxy-anchor"; err != nil || strings.Join(names, "|") != want {
		t.Errorf("tables (family name): %q, %v; want ip and ip6 svcproxy and svcproxy-anchor", names, err)
	}
}
