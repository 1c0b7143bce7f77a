package takeover

import (
	"context"
	"net/netip"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/netnstest"
)

// fakeIPVS stands in for the kernel's IPVS, which this machine's kernel lacks.
type fakeIPVS struct{ services []ipvsService }

func (f *fakeIPVS) Services() ([]ipvsService, error) {
	return append([]ipvsService(nil), f.services...), nil
}
func (f *fakeIPVS) Close() error { return nil }
func (f *fakeIPVS) DeleteService(s ipvsService) error {
	for i, x := range f.services {
		if x.String() == s.String() {
			f.services = append(f.services[:i], f.services[i+1:]...)
			return nil
		}
	}
	return unix.ESRCH
}

func svc(addrPort string) ipvsService {
	ap := netip.MustParseAddrPort(addrPort)
	return ipvsService{Addr: ap.Addr(), Port: ap.Port(), Protocol: unix.IPPROTO_TCP}
}

// ipvsWorld installs ipvs-mode kube-proxy's leftovers in ns: ipsets (kube-proxy's and
// a kube-router-like one), the chains that match them, and kube-ipvs0 (a veth here:
// no dummy links in this kernel) with two Service addresses.
func ipvsWorld(t *testing.T, ns *netnstest.NS) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandleAt(netns.NsHandle(ns.Fd), unix.NETLINK_NETFILTER, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	for name, typ := range map[string]string{
		"KUBE-CLUSTER-IP": "hash:ip,port", "KUBE-LOAD-BALANCER": "hash:ip,port", "KUBE-LOOP-BACK": "hash:ip,port,ip",
		"KUBE-NODE-PORT-TCP": "bitmap:port", "KUBE-HEALTH-CHECK-NODE-PORT": "bitmap:port", "KUBE-IPVS-IPS": "hash:ip",
		"KUBE-6-CLUSTER-IP":         "hash:ip,port",
		"KUBE-SRC-7QX2ZL3WJ5V6Y4AB": "hash:ip", "cni-allowed": "hash:net",
	} {
		opts := netlink.IpsetCreateOptions{}
		if typ == "bitmap:port" {
			opts.PortFrom, opts.PortTo = 0, 65535
		}
		if name == "KUBE-6-CLUSTER-IP" {
			opts.Family = unix.AF_INET6
		}
		if err := h.IpsetCreate(name, typ, opts); err != nil {
			t.Fatalf("create ipset %s: %v", name, err)
		}
	}
	restore(t, ns, "iptables-nft-restore", "iptables-nft-ipvs.rules")
	ns.MustRun(t, "ip", "link", "add", ipvsDevice, "type", "veth", "peer", "name", "kipvs-peer")
	ns.MustRun(t, "ip", "link", "add", "other0", "type", "veth", "peer", "name", "other1")
	ns.MustRun(t, "ip", "addr", "add", "10.96.0.1/32", "dev", ipvsDevice)
	ns.MustRun(t, "ip", "addr", "add", "10.96.0.10/32", "dev", ipvsDevice)
	return h
}

func ipsetNames(t *testing.T, h *netlink.Handle) []string {
	t.Helper()
	sets, err := h.IpsetListAll()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range sets {
		names = append(names, s.SetName)
	}
	sort.Strings(names)
	return names
}

// TestKernelRemovesIPVSModeLeftovers: kube-ipvs0 and the IPVS services on its
// addresses go, an IPVS service on another address stays; kube-proxy's ipsets go once
// the chains that match them are gone, kube-router's and others' stay.
func TestKernelRemovesIPVSModeLeftovers(t *testing.T) {
	requireTools(t, "iptables-nft-restore", "iptables-nft-save")
	ns := netnstest.New(t, "ipvs")
	h := ipvsWorld(t, ns)
	ipvsDeviceTypes["veth"] = true
	t.Cleanup(func() { delete(ipvsDeviceTypes, "veth") })
	fake := &fakeIPVS{services: []ipvsService{svc("10.96.0.1:443"), svc("10.96.0.10:80"), svc("192.0.2.5:80"), {FWMark: 7}}}
	dialIPVSFunc = func(int) (ipvsConn, error) { return fake, nil }
	t.Cleanup(func() { dialIPVSFunc = dialIPVS })

	r, err := Run(context.Background(), Options{NetNSFd: ns.Fd, NetNSPath: ns.Path()})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	golden(t, "iptables-nft-ipvs.after", save(t, ns, "iptables-nft-save"))
	if diff := cmp.Diff([]string{"192.0.2.5:80/6", "fwmark 7"}, []string{fake.services[0].String(), fake.services[1].String()}); diff != "" || len(fake.services) != 2 {
		t.Errorf("IPVS services left (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"KUBE-SRC-7QX2ZL3WJ5V6Y4AB", "cni-allowed"}, ipsetNames(t, h)); diff != "" {
		t.Errorf("ipsets left (-want +got):\n%s", diff)
	}
	links := ns.MustRun(t, "ip", "-o", "link", "show")
	if strings.Contains(links, ipvsDevice) || !strings.Contains(links, "other0") {
		t.Errorf("links after Run:\n%s", links)
	}
	want := map[Kind]int{KindChain: 11, KindJumpRule: 9, KindIPVSService: 2, KindLink: 1, KindIPSet: 7}
	if diff := cmp.Diff(want, r.Removed); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}

// TestKernelKeepsAKubeIPVS0KubeProxyDidNotMake: kube-proxy makes kube-ipvs0 a dummy; a
// device of that name of another type (a veth here) is someone else's and stays, with
// the IPVS services on its addresses.
func TestKernelKeepsAKubeIPVS0KubeProxyDidNotMake(t *testing.T) {
	requireTools(t, "iptables-nft-restore")
	ns := netnstest.New(t, "ipvsveth")
	ns.MustRun(t, "ip", "link", "add", ipvsDevice, "type", "veth", "peer", "name", "kipvs-peer")
	ns.MustRun(t, "ip", "addr", "add", "10.96.0.1/32", "dev", ipvsDevice)
	fake := &fakeIPVS{services: []ipvsService{svc("10.96.0.1:443")}}
	dialIPVSFunc = func(int) (ipvsConn, error) { return fake, nil }
	t.Cleanup(func() { dialIPVSFunc = dialIPVS })

	r, err := Run(context.Background(), Options{NetNSFd: ns.Fd, NetNSPath: ns.Path()})
	if err != nil || r.Total() != 0 || len(fake.services) != 1 {
		t.Fatalf("Run removed %v (err %v), IPVS services left %v; want nothing removed", r.Removed, err, fake.services)
	}
	if links := ns.MustRun(t, "ip", "-o", "link", "show"); !strings.Contains(links, ipvsDevice) {
		t.Errorf("%s removed:\n%s", ipvsDevice, links)
	}
}
