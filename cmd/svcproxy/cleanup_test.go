package main

import (
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

// TestCleanupOfATableItCannotRead: --cleanup deletes svcproxy's table by name,
// whatever is in it (a rule whose user data runs past its end made it panic, a set of
// a type svcproxy never uses made it fail).
func TestCleanupOfATableItCannotRead(t *testing.T) {
	netnstest.RequireRoot(t)
	bin := svcproxyBin(t)
	node := netnstest.New(t, "cleanup")
	node.MustRun(t, "sh", "-c", `printf '%s\n' "$0" | nft -f -`, `add table ip bystander
add table ip `+proxy.TableName+`
add chain ip `+proxy.TableName+` services
add set ip `+proxy.TableName+` foreign { type ether_addr; }`)
	c, err := nftables.New(nftables.WithNetNSFd(node.Fd))
	if err != nil {
		t.Fatal(err)
	}
	tb := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: proxy.TableName}
	c.AddRule(&nftables.Rule{Table: tb, Chain: &nftables.Chain{Table: tb, Name: "services"},
		Exprs: []expr.Any{&expr.Counter{}}, UserData: []byte{0xbe, 0xff, 1, 2}})
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if out, err := node.Run(bin, "--cleanup"); err != nil {
		t.Fatalf("--cleanup: %v: %s", err, out)
	}
	if tables := strings.TrimSpace(node.MustRun(t, "nft", "list", "tables")); tables != "table ip bystander" {
		t.Fatalf("tables after --cleanup: %q", tables)
	}
}
