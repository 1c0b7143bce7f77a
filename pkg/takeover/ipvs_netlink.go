package takeover

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// IPVS over generic netlink (linux/ip_vs.h), with mdlayher/netlink as the rest of
// svcproxy: list the virtual services, delete one. Attributes are host-endian except
// the port, which is in network order.

const (
	ipvsGenlVersion    = 1
	ipvsCmdDelService  = 3
	ipvsCmdGetService  = 4
	ipvsCmdAttrService = 1

	ipvsSvcAttrAF       = 1
	ipvsSvcAttrProtocol = 2
	ipvsSvcAttrAddr     = 3
	ipvsSvcAttrPort     = 4
	ipvsSvcAttrFWMark   = 5
)

// errNoIPVS means the kernel has no IPVS: there can be no IPVS services to remove.
var errNoIPVS = errors.New("no IPVS in this kernel")

// ipvsService is an IPVS virtual service: Addr is invalid for a firewall-mark
// service. id holds the identifying attributes as the kernel sent them, to name the
// service back exactly when deleting it.
type ipvsService struct {
	Addr     netip.Addr
	Port     uint16
	Protocol uint16
	FWMark   uint32
	id       []netlink.Attribute
}

func (s ipvsService) String() string {
	if !s.Addr.IsValid() {
		return fmt.Sprintf("fwmark %d", s.FWMark)
	}
	return fmt.Sprintf("%s/%d", netip.AddrPortFrom(s.Addr, s.Port), s.Protocol)
}

// ipvsConn is the part of IPVS the takeover needs (a fake stands in for it in tests:
// this kernel has no IPVS).
type ipvsConn interface {
	Services() ([]ipvsService, error)
	DeleteService(ipvsService) error
	Close() error
}

// genlIPVS is ipvsConn over generic netlink.
type genlIPVS struct {
	c      *netlink.Conn
	family uint16
}

// dialIPVS opens IPVS in the namespace nsFd (0: the current one); errNoIPVS when the
// kernel has none.
func dialIPVS(nsFd int) (ipvsConn, error) {
	c, err := netlink.Dial(unix.NETLINK_GENERIC, &netlink.Config{NetNS: nsFd})
	if err != nil {
		return nil, fmt.Errorf("dial generic netlink: %w", err)
	}
	family, err := genlFamily(c, "IPVS")
	if err != nil {
		c.Close()
		return nil, err
	}
	return &genlIPVS{c: c, family: family}, nil
}

func genlFamily(c *netlink.Conn, name string) (uint16, error) {
	attrs, err := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.CTRL_ATTR_FAMILY_NAME, Data: []byte(name + "\x00")}})
	if err != nil {
		return 0, err
	}
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.GENL_ID_CTRL, Flags: netlink.Request},
		Data:   append([]byte{unix.CTRL_CMD_GETFAMILY, 1, 0, 0}, attrs...),
	})
	if errors.Is(err, unix.ENOENT) {
		return 0, errNoIPVS
	}
	if err != nil {
		return 0, fmt.Errorf("resolve generic netlink family %s: %w", name, err)
	}
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		ad, err := nlkit.Genl(m.Data)
		if err != nil {
			return 0, err
		}
		for ad.Next() {
			if ad.Type() == unix.CTRL_ATTR_FAMILY_ID {
				return ad.Uint16(), ad.Err()
			}
		}
	}
	return 0, fmt.Errorf("generic netlink family %s: no id in the answer", name)
}

func (g *genlIPVS) Close() error { return g.c.Close() }

func (g *genlIPVS) Services() ([]ipvsService, error) {
	msgs, err := g.c.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(g.family), Flags: netlink.Request | netlink.Dump},
		Data:   []byte{ipvsCmdGetService, ipvsGenlVersion, 0, 0},
	})
	if err != nil {
		return nil, fmt.Errorf("list IPVS services: %w", err)
	}
	var out []ipvsService
	for _, m := range msgs {
		s, ok, err := decodeIPVSService(m.Data)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, s)
		}
	}
	return out, nil
}

func (g *genlIPVS) DeleteService(s ipvsService) error {
	inner, err := netlink.MarshalAttributes(s.id)
	if err != nil {
		return err
	}
	attrs, err := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NLA_F_NESTED | ipvsCmdAttrService, Data: inner}})
	if err != nil {
		return err
	}
	_, err = g.c.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(g.family), Flags: netlink.Request | netlink.Acknowledge},
		Data:   append([]byte{ipvsCmdDelService, ipvsGenlVersion, 0, 0}, attrs...),
	})
	if err != nil {
		return fmt.Errorf("delete IPVS service %s: %w", s, err)
	}
	return nil
}

// decodeIPVSService reads one IPVS_CMD_NEW_SERVICE dump message (generic netlink
// header, then IPVS_CMD_ATTR_SERVICE); ok is false for a message without a service.
func decodeIPVSService(data []byte) (s ipvsService, ok bool, err error) {
	ad, err := nlkit.Genl(data)
	if err != nil {
		return s, false, fmt.Errorf("decode IPVS message: %w", err)
	}
	for ad.Next() {
		if ad.Type() != ipvsCmdAttrService {
			continue
		}
		ok = true
		ad.Nested(func(nd *netlink.AttributeDecoder) error {
			var af uint16
			var addr []byte
			for nd.Next() {
				switch t := nd.Type(); t {
				case ipvsSvcAttrAF:
					af = nd.Uint16()
				case ipvsSvcAttrProtocol:
					s.Protocol = nd.Uint16()
				case ipvsSvcAttrAddr:
					addr = nd.Bytes()
				case ipvsSvcAttrPort:
					if b := nd.Bytes(); len(b) == 2 {
						s.Port = binary.BigEndian.Uint16(b)
					}
				case ipvsSvcAttrFWMark:
					s.FWMark = nd.Uint32()
				default:
					continue
				}
				s.id = append(s.id, netlink.Attribute{Type: nd.Type(), Data: append([]byte(nil), nd.Bytes()...)})
			}
			switch {
			case af == unix.AF_INET && len(addr) >= 4:
				s.Addr = netip.AddrFrom4([4]byte(addr[:4]))
			case af == unix.AF_INET6 && len(addr) >= 16:
				s.Addr = netip.AddrFrom16([16]byte(addr[:16]))
			}
			return nd.Err()
		})
	}
	if err := ad.Err(); err != nil {
		return ipvsService{}, false, fmt.Errorf("decode IPVS service: %w", err)
	}
	return s, ok, nil
}
