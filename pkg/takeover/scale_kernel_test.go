package takeover

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netnstest"
)

// kubeProxyRuleset writes an iptables-save of iptables-mode kube-proxy with n Services
// of e endpoints each, shaped as proxier.go writes it.
func kubeProxyRuleset(n, e int) string {
	var chains, rules strings.Builder
	chains.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
	chains.WriteString(":KUBE-SERVICES - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n:KUBE-POSTROUTING - [0:0]\n")
	rules.WriteString("-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n")
	rules.WriteString("-A OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n")
	rules.WriteString("-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING\n")
	rules.WriteString("-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000\n")
	rules.WriteString("-A KUBE-POSTROUTING -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE --random-fully\n")
	for s := 0; s < n; s++ {
		svc := fmt.Sprintf("KUBE-SVC-%016X", s)
		ip := fmt.Sprintf("10.96.%d.%d", s/250, s%250+1)
		chains.WriteString(":" + svc + " - [0:0]\n")
		fmt.Fprintf(&rules, "-A KUBE-SERVICES -d %s/32 -p tcp -m comment --comment \"ns/svc%d:http cluster IP\" -m tcp --dport 80 -j %s\n", ip, s, svc)
		fmt.Fprintf(&rules, "-A %s ! -s 10.244.0.0/16 -d %s/32 -p tcp -m comment --comment \"ns/svc%d:http cluster IP\" -m tcp --dport 80 -j KUBE-MARK-MASQ\n", svc, ip, s)
		for i := 0; i < e; i++ {
			sep := fmt.Sprintf("KUBE-SEP-%08X%08X", s, i)
			ep := fmt.Sprintf("10.244.%d.%d", (s*e+i)/250%250, (s*e+i)%250+1)
			chains.WriteString(":" + sep + " - [0:0]\n")
			if i < e-1 {
				fmt.Fprintf(&rules, "-A %s -m comment --comment \"ns/svc%d:http -> %s:80\" -m statistic --mode random --probability %0.10f -j %s\n", svc, s, ep, 1/float64(e-i), sep)
			} else {
				fmt.Fprintf(&rules, "-A %s -m comment --comment \"ns/svc%d:http -> %s:80\" -j %s\n", svc, s, ep, sep)
			}
			fmt.Fprintf(&rules, "-A %s -s %s/32 -m comment --comment \"ns/svc%d:http\" -j KUBE-MARK-MASQ\n", sep, ep, s)
			fmt.Fprintf(&rules, "-A %s -p tcp -m comment --comment \"ns/svc%d:http\" -m tcp -j DNAT --to-destination %s:80\n", sep, s, ep)
		}
	}
	return chains.String() + rules.String() + "COMMIT\n"
}

// TestKernelTakeoverScale times Run on a big iptables-mode ruleset. It runs only with
// SVCPROXY_TAKEOVER_SCALE=N (N Services of 10 endpoints): loading the fixture with
// iptables-nft-restore takes longer than the takeover.
func TestKernelTakeoverScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SVCPROXY_TAKEOVER_SCALE"))
	if n <= 0 {
		t.Skip("set SVCPROXY_TAKEOVER_SCALE=N to time the takeover of N Services x 10 endpoints")
	}
	requireTools(t, "iptables-nft-restore", "iptables-nft-save")
	ns := netnstest.New(t, "scale")
	path := t.TempDir() + "/rules"
	if err := os.WriteFile(path, []byte(kubeProxyRuleset(n, 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	ns.MustRun(t, "sh", "-c", "iptables-nft-restore < "+path)
	restored := time.Since(t0)
	t0 = time.Now()
	r, err := Run(context.Background(), Options{NetNSFd: ns.Fd, NetNSPath: ns.Path()})
	took := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 + n*11; r.Removed[KindChain] != want {
		t.Errorf("removed %d chains, want %d", r.Removed[KindChain], want)
	}
	if left := strings.Count(ns.MustRun(t, "iptables-nft-save"), "KUBE-"); left != 0 {
		t.Errorf("%d KUBE- mentions left", left)
	}
	t.Logf("%d Services x 10 endpoints (%d chains): iptables-nft-restore %v, takeover.Run %v", n, r.Removed[KindChain], restored.Round(time.Millisecond), took.Round(time.Millisecond))
}
