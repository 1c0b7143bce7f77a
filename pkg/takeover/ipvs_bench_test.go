package takeover

import (
	"errors"
	"fmt"
	"os/exec"
	"testing"

	"github.com/svcproxy/svcproxy/internal/netnstest"
)

// BenchmarkKernelIPVSServices lists 100 IPVS virtual services through the
// hand-written generic netlink path (ipvs_netlink.go), in a namespace it creates:
//
//	nice -n 10 go test -count=1 -run '^$' -bench KernelIPVS -benchmem ./pkg/takeover/
//
// It is skipped on a kernel without IPVS (this project's test machines: no ip_vs
// module), and without ipvsadm to create the services. The library side of the
// comparison (moby/ipvs, cloudflare/ipvs) is not benchmarked: neither can run
// here either, and each has a functional gap that keeps the hand-written path
// whatever the numbers (docs/netlink.md, "IPVS").
func BenchmarkKernelIPVSServices(b *testing.B) {
	ns := netnstest.New(b, "ipvs")
	c, err := dialIPVS(ns.Fd)
	if errors.Is(err, errNoIPVS) {
		b.Skip("this kernel has no IPVS (no ip_vs module loaded or built in): IPVS generic netlink cannot be measured here")
	}
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := exec.LookPath("ipvsadm"); err != nil {
		b.Skip("no ipvsadm to create the IPVS services to list")
	}
	for i := range 100 {
		ns.MustRun(b, "ipvsadm", "-A", "-t", fmt.Sprintf("10.96.%d.%d:80", i/250, 1+i%250), "-s", "rr")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		svcs, err := c.Services()
		if err != nil {
			b.Fatal(err)
		}
		if len(svcs) != 100 {
			b.Fatalf("%d services", len(svcs))
		}
	}
}
