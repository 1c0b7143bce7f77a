package takeover

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcproxy/svcproxy/internal/netnstest"
)

// TestKernelDetectsIptablesLegacy: kube-proxy's chains in iptables-legacy (which
// netlink cannot edit) are listed in the report, kubelet's are not, and the command
// the report says to run removes exactly kube-proxy's chains and jumps.
func TestKernelDetectsIptablesLegacy(t *testing.T) {
	requireTools(t, "iptables-legacy-restore", "iptables-legacy-save", "ip6tables-legacy-restore", "ip6tables-legacy-save", "iptables-nft-save")
	ns := netnstest.New(t, "legacy")
	restore(t, ns, "iptables-legacy-restore", "iptables-nft.rules")
	restore(t, ns, "ip6tables-legacy-restore", "ip6tables-nft.rules")

	r, err := Run(context.Background(), Options{NetNSFd: ns.Fd, NetNSPath: ns.Path()})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Total() != 0 {
		t.Errorf("removed %v from iptables-legacy's namespace; netlink sees nothing of it", r.Removed)
	}
	if len(r.Legacy) != 24+14 || r.LegacyHint == "" {
		t.Fatalf("legacy chains found: %d %q, hint %q; want 38 and a hint", len(r.Legacy), r.Legacy, r.LegacyHint)
	}
	for _, want := range []string{"ip nat KUBE-SERVICES", "ip filter KUBE-PROXY-FIREWALL", "ip mangle KUBE-PROXY-CANARY", "ip6 nat KUBE-SVC-FW3QPPIFZS3GG3DJ"} {
		if !contains(r.Legacy, want) {
			t.Errorf("legacy chains lack %q", want)
		}
	}
	for _, c := range r.Legacy {
		if strings.Contains(c, "KUBE-FIREWALL") || strings.Contains(c, "HINT") || strings.Contains(c, "KUBELET") || strings.Contains(c, "MARK-DROP") {
			t.Errorf("kubelet's chain %q reported as kube-proxy's", c)
		}
	}

	ns.MustRun(t, "sh", "-c", r.LegacyHint)
	// The same tables as iptables-nft's after Run, listed in another table order.
	for cmd, name := range map[string]string{"iptables-legacy-save": "iptables-nft.after", "ip6tables-legacy-save": "ip6tables-nft.after"} {
		want, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(saveTables(string(want)), saveTables(save(t, ns, cmd))); diff != "" {
			t.Errorf("%s after the hint ran, against %s (-want +got):\n%s", cmd, name, diff)
		}
	}
	again, err := Run(context.Background(), Options{NetNSFd: ns.Fd, NetNSPath: ns.Path()})
	if err != nil || len(again.Legacy) != 0 {
		t.Errorf("after the hint ran: legacy %q, err %v; want none", again.Legacy, err)
	}
}

// saveTables splits iptables-save output by table.
func saveTables(save string) map[string]string {
	out := map[string]string{}
	table := ""
	for _, l := range strings.Split(save, "\n") {
		if strings.HasPrefix(l, "*") {
			table = l
		}
		if table != "" && l != "" {
			out[table] += l + "\n"
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
