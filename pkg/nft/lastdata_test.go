package nft

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
)

func TestLastData(t *testing.T) {
	for _, tc := range []struct {
		name   string
		family Family
		ip     string
		ep     func(i int) string
		ipType DataType
	}{
		{"IPv4", FamilyIPv4, "10.96.0.1", func(i int) string { return fmt.Sprintf("10.0.0.%d", i) }, TypeIPv4Addr},
		{"IPv6", FamilyIPv6, "fd00::1", func(i int) string { return fmt.Sprintf("fd01::%d", i) }, TypeIPv6Addr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eps := &Set{Name: "eps", Key: []DataType{tc.ipType, TypeInetProto, TypeInetService, TypeInteger}, Data: []DataType{tc.ipType, TypeInetService}}
			single := &Set{Name: "ips", Key: []DataType{tc.ipType}}
			r := NewRuleset(tc.family, "t", eps, single)
			svc := netip.MustParseAddr(tc.ip)
			key := func(port uint16, slot int) []Datum {
				return []Datum{IP(svc), Proto(ProtoTCP), Port(port), Int(uint32(slot))}
			}
			var f Fragment
			for slot, ep := range []int{7, 3, 9} {
				f.Elements = append(f.Elements, Element{Set: "eps", Key: key(80, slot), Data: []Datum{IP(netip.MustParseAddr(tc.ep(ep))), Port(8080)}})
			}
			f.Elements = append(f.Elements,
				Element{Set: "eps", Key: key(443, 0), Data: []Datum{IP(netip.MustParseAddr(tc.ep(1))), Port(8443)}}, // another port
				Element{Set: "ips", Key: []Datum{IP(svc)}})
			r.SetFragment("svc", f)
			r.SetFragment("other", Fragment{Elements: []Element{{Set: "eps", Key: []Datum{IP(netip.MustParseAddr(tc.ep(200))), Proto(ProtoTCP), Port(80), Int(0)},
				Data: []Datum{IP(netip.MustParseAddr(tc.ep(2))), Port(8080)}}}})

			var got []string
			for rest, data := range r.LastData("svc", "eps", []Datum{IP(svc), Proto(ProtoTCP), Port(80)}) {
				got = append(got, fmt.Sprintf("%v: %v", rest, data))
			}
			want := []string{
				fmt.Sprintf("[%v]: [%v %v]", Int(0), IP(netip.MustParseAddr(tc.ep(7))), Port(8080)),
				fmt.Sprintf("[%v]: [%v %v]", Int(1), IP(netip.MustParseAddr(tc.ep(3))), Port(8080)),
				fmt.Sprintf("[%v]: [%v %v]", Int(2), IP(netip.MustParseAddr(tc.ep(9))), Port(8080)),
			}
			if !slices.Equal(got, want) {
				t.Fatalf("LastData = %q, want %q", got, want)
			}
			for _, q := range []struct {
				owner, set string
				prefix     []Datum
			}{
				{"nobody", "eps", []Datum{IP(svc)}},
				{"svc", "undeclared", []Datum{IP(svc)}},
				{"svc", "ips", []Datum{IP(svc)}}, // the whole key: nothing is left to yield
				{"svc", "eps", []Datum{IP(svc), Proto(ProtoUDP), Port(80)}},
			} {
				for rest, data := range r.LastData(q.owner, q.set, q.prefix) {
					t.Errorf("LastData(%s, %s, %v) yielded %v: %v", q.owner, q.set, q.prefix, rest, data)
				}
			}
		})
	}
}
