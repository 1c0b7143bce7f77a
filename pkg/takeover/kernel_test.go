package takeover

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcproxy/svcproxy/internal/netnstest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// requireTools skips a kernel test whose fixtures need a command that is missing.
func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	netnstest.RequireRoot(t)
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("kernel test: needs %s to install the fixture (`make test` installs it)", tool)
		}
	}
}

// restore loads an iptables-save fixture (comment lines dropped) with the given
// restore command inside ns.
func restore(t *testing.T, ns *netnstest.NS, cmd, fixture string) {
	t.Helper()
	ns.MustRun(t, "sh", "-c", `grep -v '^#' "$1" | `+cmd, "sh", filepath.Join("testdata", fixture))
}

// save lists iptables-nft's tables as iptables-save text, without the comment lines
// (they carry the time).
func save(t *testing.T, ns *netnstest.NS, cmd string) string {
	t.Helper()
	var keep []string
	for _, l := range strings.Split(ns.MustRun(t, cmd), "\n") {
		if !strings.HasPrefix(l, "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

// bystander is another program's nftables table: it must come out byte-identical.
const bystander = `table inet bystander {
	set allowed {
		type ipv4_addr
		elements = { 192.0.2.1 }
	}
	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr 192.0.2.10 tcp dport 80 dnat ip to 10.0.0.1:80
	}
	chain input {
		type filter hook input priority filter; policy accept;
		ip saddr @allowed accept
	}
}`

// TestKernelRemovesIptablesAndNftablesModeLeftovers installs what iptables-mode and
// nftables-mode kube-proxy leave (with kubelet's chains, a Docker-like and a CNI-like
// program's chains and rules, and another program's nftables table), takes over, and
// compares what is left with the golden listings: every kube-proxy chain and every
// jump into one gone, everything else as it was.
func TestKernelRemovesIptablesAndNftablesModeLeftovers(t *testing.T) {
	requireTools(t, "iptables-nft-restore", "ip6tables-nft-restore", "iptables-nft-save", "ip6tables-nft-save", "nft")
	ns := netnstest.New(t, "takeover")
	restore(t, ns, "iptables-nft-restore", "iptables-nft.rules")
	restore(t, ns, "ip6tables-nft-restore", "ip6tables-nft.rules")
	ns.MustRun(t, "nft", "-f", filepath.Join("testdata", "kube-proxy.nft"))
	ns.MustRun(t, "sh", "-c", `printf '%s\n' "$0" | nft -f -`, bystander)
	bystanderBefore := ns.MustRun(t, "nft", "list", "table", "inet", "bystander")

	r, err := Run(context.Background(), Options{NetNSFd: ns.Fd, NetNSPath: ns.Path()})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	golden(t, "iptables-nft.after", save(t, ns, "iptables-nft-save"))
	golden(t, "ip6tables-nft.after", save(t, ns, "ip6tables-nft-save"))
	if got := ns.MustRun(t, "nft", "list", "table", "inet", "bystander"); got != bystanderBefore {
		t.Errorf("bystander table changed:\n%s", cmp.Diff(bystanderBefore, got))
	}
	if tables := ns.MustRun(t, "nft", "list", "tables"); strings.Contains(tables, "kube-proxy") {
		t.Errorf("kube-proxy tables remain:\n%s", tables)
	}
	want := map[Kind]int{KindChain: 24 + 14, KindJumpRule: 12 + 12, KindTable: 2}
	if diff := cmp.Diff(want, r.Removed); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if len(r.Kept) != 0 || len(r.Legacy) != 0 {
		t.Errorf("report: kept %v, legacy %v", r.Kept, r.Legacy)
	}

	again, err := Run(context.Background(), Options{NetNSFd: ns.Fd, NetNSPath: ns.Path()})
	if err != nil || again.Total() != 0 {
		t.Errorf("second Run: removed %v, err %v; want nothing", again.Removed, err)
	}
}

// hostportRules has chains of kubelet's old hostport manager (dockershim's
// KUBE-HOSTPORTS, KUBE-HP-*), which jump to kube-proxy's KUBE-MARK-MASQ; one also
// jumps into a Service chain (made up, to need a second round of reading).
const hostportRules = `*nat
:PREROUTING ACCEPT [0:0]
:KUBE-HOSTPORTS - [0:0]
:KUBE-HP-4YVONL46AKYWSKS3 - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-SEP-N4G2XR5TDX7PQE7P - [0:0]
:KUBE-SEP-XQ2B4K7HRJZ5CWM3 - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-TCOU7JCQXEZGVUNU - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A PREROUTING -m comment --comment "kube hostport portals" -m addrtype --dst-type LOCAL -j KUBE-HOSTPORTS
-A KUBE-HOSTPORTS -p tcp -m comment --comment "nginx hostport 8080" -m tcp --dport 8080 -j KUBE-HP-4YVONL46AKYWSKS3
-A KUBE-HP-4YVONL46AKYWSKS3 -s 10.244.1.9/32 -j KUBE-MARK-MASQ
-A KUBE-HP-4YVONL46AKYWSKS3 -p tcp -j KUBE-SVC-TCOU7JCQXEZGVUNU
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-SEP-N4G2XR5TDX7PQE7P -p tcp -m tcp -j DNAT --to-destination 10.244.2.7:80
-A KUBE-SEP-XQ2B4K7HRJZ5CWM3 -p tcp -m tcp -j DNAT --to-destination 10.244.1.6:80
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-TCOU7JCQXEZGVUNU
-A KUBE-SVC-TCOU7JCQXEZGVUNU -j KUBE-SEP-N4G2XR5TDX7PQE7P
COMMIT
`

// TestKernelKeepsWhatAnotherProgramJumpsTo: a kube-proxy chain that another
// program's chain jumps to stays, with every kube-proxy chain it reaches (read only
// then: kube-proxy's chains are not read otherwise); the rest goes.
func TestKernelKeepsWhatAnotherProgramJumpsTo(t *testing.T) {
	requireTools(t, "iptables-nft-restore", "iptables-nft-save")
	ns := netnstest.New(t, "kept")
	ns.MustRun(t, "sh", "-c", `printf '%s' "$0" | iptables-nft-restore`, hostportRules)
	r, err := Run(context.Background(), Options{NetNSFd: ns.Fd, NetNSPath: ns.Path()})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []string{
		"ip nat KUBE-MARK-MASQ: chain KUBE-HP-4YVONL46AKYWSKS3 jumps to it",
		"ip nat KUBE-SEP-N4G2XR5TDX7PQE7P: chain KUBE-SVC-TCOU7JCQXEZGVUNU jumps to it",
		"ip nat KUBE-SVC-TCOU7JCQXEZGVUNU: chain KUBE-HP-4YVONL46AKYWSKS3 jumps to it",
	}
	if diff := cmp.Diff(want, r.Kept); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[Kind]int{KindChain: 2, KindJumpRule: 1}, r.Removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	after := save(t, ns, "iptables-nft-save")
	for _, gone := range []string{"KUBE-SERVICES", "KUBE-SEP-XQ2B4K7HRJZ5CWM3"} {
		if strings.Contains(after, gone) {
			t.Errorf("%s left:\n%s", gone, after)
		}
	}
	for _, kept := range []string{"-A KUBE-HP-4YVONL46AKYWSKS3 -p tcp -j KUBE-SVC-TCOU7JCQXEZGVUNU", "-A KUBE-SVC-TCOU7JCQXEZGVUNU -j KUBE-SEP-N4G2XR5TDX7PQE7P", "-A KUBE-MARK-MASQ -j MARK"} {
		if !strings.Contains(after, kept) {
			t.Errorf("%q gone:\n%s", kept, after)
		}
	}
}
