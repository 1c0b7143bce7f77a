package node

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/google/nftables"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
	"github.com/svcproxy/svcproxy/pkg/nodeaddr"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

// PrimaryFamily is kube-proxy's primary IP family (detectNodeIPs): that of a
// --bind-address other than 0.0.0.0/::, else that of the Node's primary IP,
// else IPv4.
func PrimaryFamily(status []corev1.NodeAddress, bindAddress string) endpoints.Family {
	if bind, err := netip.ParseAddr(bindAddress); err == nil && !bind.IsUnspecified() {
		return endpoints.FamilyOf(bind)
	}
	if ips := nodeaddr.PrimaryIPs(status, ""); len(ips) > 0 {
		return endpoints.FamilyOf(ips[0])
	}
	return endpoints.IPv4
}

// ServedFamilies are the IP families this node serves, primary first: the
// primary one, which must be usable, and the other one too when it is, as
// kube-proxy runs dual-stack whenever the node supports both families (and
// logs why not otherwise). A cluster that has no Service of the second
// family costs an empty table.
func ServedFamilies(primary endpoints.Family, usable func(endpoints.Family) error) ([]endpoints.Family, error) {
	if err := usable(primary); err != nil {
		return nil, fmt.Errorf("no support for primary IP family %s: %w", primary, err)
	}
	other := primary.Other()
	if err := usable(other); err != nil {
		klog.InfoS("Running in single-stack mode", "ipFamily", primary, "unusedFamily", other, "reason", err.Error())
		return []endpoints.Family{primary}, nil
	}
	klog.InfoS("Running in dual-stack mode", "primaryIPFamily", primary)
	return []endpoints.Family{primary, other}, nil
}

// FamilyUsable is the real node's check that family f can be served. IPv4 always
// is, as in kube-proxy's nftables mode (a kernel without it fails the first
// sync, loudly). IPv6: the kernel has it (/proc/net/if_inet6 exists and
// net.ipv6.conf.all.disable_ipv6 is not 1, kube-proxy's check), pkg/proxy
// renders it, and nf_tables takes an ip6 table in this network namespace.
func FamilyUsable(f endpoints.Family) error {
	if f == endpoints.IPv4 {
		return nil
	}
	if err := ipv6Enabled("/proc"); err != nil {
		return err
	}
	if !Renders(f) {
		return fmt.Errorf("this build of svcproxy renders no %s table", nftFamily(f))
	}
	return probeTable(f, 0)
}

// ipv6Enabled reads kube-proxy's signs of IPv6 under procRoot.
func ipv6Enabled(procRoot string) error {
	if _, err := os.Stat(procRoot + "/net/if_inet6"); err != nil {
		return fmt.Errorf("no kernel support for IPv6: %w", err)
	}
	b, err := os.ReadFile(procRoot + "/sys/net/ipv6/conf/all/disable_ipv6")
	if err == nil && strings.TrimSpace(string(b)) == "1" {
		return errors.New("IPv6 disabled in the kernel (net.ipv6.conf.all.disable_ipv6=1)")
	}
	return nil
}

// Renders reports whether pkg/proxy puts family f's rules in f's own
// table: two proxies rendering the same table would undo each other's work.
func Renders(f endpoints.Family) bool {
	r := proxy.RenderAll(endpoints.Snapshot{}, proxy.Options{Family: f})
	return r.Family == nftFamily(f)
}

// nftFamily is the table family f's rules belong in, said independently of
// pkg/proxy (whose proxy.TableFamily is what Renders checks).
func nftFamily(f endpoints.Family) nft.Family {
	if f == endpoints.IPv6 {
		return nft.FamilyIPv6
	}
	return nft.FamilyIPv4
}

// probeTable adds svcproxy's table of family f (a no-op when it exists) in the
// network namespace nsFd (0: ours): the proxy of that family takes it over right
// after. A kernel without nf_tables support for the family refuses it.
func probeTable(f endpoints.Family, nsFd int) error {
	var opts []nftables.ConnOption
	if nsFd != 0 {
		opts = append(opts, nftables.WithNetNSFd(nsFd))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return fmt.Errorf("nftables netlink: %w", err)
	}
	c.AddTable(&nftables.Table{Family: nftables.TableFamily(nftFamily(f)), Name: proxy.TableName})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("create table %s %s: %w", nftFamily(f), proxy.TableName, err)
	}
	return nil
}
