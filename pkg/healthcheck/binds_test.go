package healthcheck

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svcproxy/svcproxy/pkg/nodeaddr"
)

func TestBinds(t *testing.T) {
	a := netip.MustParseAddr
	for _, tc := range []struct {
		name string
		sel  nodeaddr.Selection
		want []bind
	}{
		{name: "all addresses of both families: one listener", sel: nodeaddr.Selection{AllIPv4: true, AllIPv6: true, Addrs: []netip.Addr{a("10.0.0.5")}},
			want: []bind{{network: "tcp"}}},
		{name: "IPv4 restricted, IPv6 all", sel: nodeaddr.Selection{AllIPv6: true, Addrs: []netip.Addr{a("10.0.0.5"), a("127.0.0.1"), a("fd00::5")}},
			want: []bind{{"tcp6", "::"}, {"tcp", "10.0.0.5"}, {"tcp", "127.0.0.1"}}},
		{name: "IPv4 all, IPv6 restricted; link-local skipped", sel: nodeaddr.Selection{AllIPv4: true, Addrs: []netip.Addr{a("10.0.0.5"), a("fd00::5"), a("fe80::1")}},
			want: []bind{{"tcp4", "0.0.0.0"}, {"tcp", "fd00::5"}}},
		{name: "nothing selected: no listener", sel: nodeaddr.Selection{}, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Binds(tc.sel), cmp.AllowUnexported(bind{})); diff != "" {
				t.Errorf("Binds (-want +got):\n%s", diff)
			}
		})
	}
}
