package proxy

import (
	"net/netip"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// ipFields is what differs between the ip and ip6 tables: the table's family, the
// address type of set keys and data, and the fields that load an address. Everything
// else (layout, chain names, shards, ports) is the same in both, as in kube-proxy's
// per-family proxiers.
type ipFields struct {
	table       nft.Family
	addr        nft.DataType
	saddr       nft.Field
	daddr       nft.Field
	ctOrigDaddr nft.Field
	icmp        uint8 // the ICMP protocol a ClusterIP drops (ping)
}

var (
	ip4Fields = ipFields{table: nft.FamilyIPv4, addr: nft.TypeIPv4Addr, saddr: nft.FieldIPSaddr, daddr: nft.FieldIPDaddr,
		ctOrigDaddr: nft.FieldCtOrigDaddr, icmp: nft.ProtoICMP}
	ip6Fields = ipFields{table: nft.FamilyIPv6, addr: nft.TypeIPv6Addr, saddr: nft.FieldIP6Saddr, daddr: nft.FieldIP6Daddr,
		ctOrigDaddr: nft.FieldCtOrigDaddr6, icmp: nft.ProtoICMPv6}
)

// fieldsOf returns the fields of a proxy's family.
func fieldsOf(f endpoints.Family) ipFields {
	if f == endpoints.IPv6 {
		return ip6Fields
	}
	return ip4Fields
}

// fieldsFor returns the fields of the table an address is served in.
func fieldsFor(a netip.Addr) ipFields {
	if a.Is6() {
		return ip6Fields
	}
	return ip4Fields
}

// TableFamily is the nftables family of the table a proxy of family f programs.
func TableFamily(f endpoints.Family) nft.Family { return fieldsOf(f).table }

// ofFamily reports whether a belongs to the family the fields serve (an IPv4-mapped
// IPv6 address belongs to neither: the tracker never hands one out).
func (x ipFields) ofFamily(a netip.Addr) bool {
	if x.table == nft.FamilyIPv6 {
		return a.Is6() && !a.Is4In6()
	}
	return a.Is4()
}
