package endpoints

import "net/netip"

// FamilyOf is the family of a node's address (a --bind-address, a Node's IP, a
// CIDR's address): an IPv4-mapped IPv6 address counts as IPv4 here, as a user
// writing ::ffff:10.0.0.1 means the IPv4 node. (A Service's or a Pod's address is
// matched strictly instead; see matches.)
func FamilyOf(a netip.Addr) Family {
	if a.Unmap().Is4() {
		return IPv4
	}
	return IPv6
}

// Other is the other IP family: IPv6 for IPv4, IPv4 for IPv6.
func (f Family) Other() Family {
	if f == IPv4 {
		return IPv6
	}
	return IPv4
}
