package takeover

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// ipvsServiceMsg is an IPVS_CMD_NEW_SERVICE dump message as the kernel writes it
// (ip_vs_genl_fill_service): a firewall-mark service has no address, protocol or port.
func ipvsServiceMsg(t testing.TB, af uint16, addr netip.Addr, port uint16, fwmark uint32) []byte {
	ne := binary.NativeEndian
	svc := []netlink.Attribute{{Type: ipvsSvcAttrAF, Data: ne.AppendUint16(nil, af)}}
	if fwmark != 0 {
		svc = append(svc, netlink.Attribute{Type: ipvsSvcAttrFWMark, Data: ne.AppendUint32(nil, fwmark)})
	} else {
		a16 := make([]byte, 16)
		copy(a16, addr.AsSlice())
		svc = append(svc,
			netlink.Attribute{Type: ipvsSvcAttrProtocol, Data: ne.AppendUint16(nil, unix.IPPROTO_TCP)},
			netlink.Attribute{Type: ipvsSvcAttrAddr, Data: a16},
			netlink.Attribute{Type: ipvsSvcAttrPort, Data: binary.BigEndian.AppendUint16(nil, port)})
	}
	svc = append(svc, netlink.Attribute{Type: 6, Data: []byte("rr\x00")}) // scheduler: not part of the id
	inner, err := netlink.MarshalAttributes(svc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NLA_F_NESTED | ipvsCmdAttrService, Data: inner}})
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte{ipvsCmdGetService, ipvsGenlVersion, 0, 0}, b...)
}

func TestDecodeIPVSServiceAndPick(t *testing.T) {
	var all []ipvsService
	for _, m := range [][]byte{
		ipvsServiceMsg(t, unix.AF_INET, netip.MustParseAddr("10.96.0.10"), 80, 0),
		ipvsServiceMsg(t, unix.AF_INET6, netip.MustParseAddr("fd00:10:96::a"), 443, 0),
		ipvsServiceMsg(t, unix.AF_INET, netip.MustParseAddr("192.0.2.5"), 80, 0),
		ipvsServiceMsg(t, unix.AF_INET, netip.Addr{}, 0, 9),
	} {
		s, ok, err := decodeIPVSService(m)
		if err != nil || !ok {
			t.Fatalf("decode: ok %v err %v", ok, err)
		}
		all = append(all, s)
	}
	var names []string
	for _, s := range all {
		names = append(names, s.String())
	}
	if diff := cmp.Diff([]string{"10.96.0.10:80/6", "[fd00:10:96::a]:443/6", "192.0.2.5:80/6", "fwmark 9"}, names); diff != "" {
		t.Fatalf("decoded (-want +got):\n%s", diff)
	}
	if len(all[0].id) != 4 || len(all[3].id) != 2 {
		t.Errorf("ids keep AF, protocol, address, port (or AF, fwmark) only: %v / %v", all[0].id, all[3].id)
	}
	onDevice := map[netip.Addr]bool{netip.MustParseAddr("10.96.0.10"): true, netip.MustParseAddr("fd00:10:96::a"): true}
	var picked []string
	for _, s := range ipvsServicesOn(all, onDevice) {
		picked = append(picked, s.String())
	}
	if diff := cmp.Diff([]string{"10.96.0.10:80/6", "[fd00:10:96::a]:443/6"}, picked); diff != "" {
		t.Errorf("picked (-want +got):\n%s", diff)
	}
}

func FuzzDecodeIPVSService(f *testing.F) {
	f.Add(ipvsServiceMsg(f, unix.AF_INET, netip.MustParseAddr("10.96.0.10"), 80, 0))
	f.Add(ipvsServiceMsg(f, unix.AF_INET, netip.Addr{}, 0, 9))
	f.Fuzz(func(t *testing.T, msg []byte) {
		s, ok, err := decodeIPVSService(msg)
		if err != nil && (ok || s.Addr.IsValid()) {
			t.Fatalf("error %v with service %v", err, s)
		}
	})
}
