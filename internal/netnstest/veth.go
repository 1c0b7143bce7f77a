package netnstest

import "testing"

// VethPair gives the namespace a veth pair a-b holding addresses addrA and
// addrB (CIDR), both up: two local addresses on two interfaces.
func (ns *NS) VethPair(t testing.TB, a, addrA, b, addrB string) {
	t.Helper()
	ns.MustRun(t, "ip", "link", "add", a, "type", "veth", "peer", "name", b)
	ns.MustRun(t, "ip", "addr", "add", addrA, "dev", a)
	ns.MustRun(t, "ip", "addr", "add", addrB, "dev", b)
	ns.MustRun(t, "ip", "link", "set", a, "up")
	ns.MustRun(t, "ip", "link", "set", b, "up")
}
