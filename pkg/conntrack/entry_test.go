package conntrack

import (
	"net/netip"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func TestStale(t *testing.T) {
	ap := netip.MustParseAddrPort
	svc := Service{Proto: unix.IPPROTO_UDP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 53}
	svc6 := Service{Proto: unix.IPPROTO_UDP, Addr: netip.MustParseAddr("fd00::10"), Port: 53}
	sctp := Service{Proto: unix.IPPROTO_SCTP, Addr: netip.MustParseAddr("10.96.0.11"), Port: 9}
	serving := Serving{
		svc:  {ap("10.244.1.2:53"), ap("10.244.1.3:5353")},
		svc6: {ap("[fd00:244::2]:53")},
		sctp: {ap("10.244.1.2:9")},
		{Proto: unix.IPPROTO_UDP, Addr: netip.MustParseAddr("10.96.0.12"), Port: 53}: nil,
	}
	udp := func(dst, replySrc string) Entry {
		return Entry{Proto: unix.IPPROTO_UDP, OrigSrc: ap("10.244.2.9:40000"), OrigDst: ap(dst), ReplySrc: ap(replySrc)}
	}
	tests := []struct {
		name string
		e    Entry
		want bool
	}{
		{"translated to a serving endpoint", udp("10.96.0.10:53", "10.244.1.2:53"), false},
		{"translated to the other serving endpoint and its port", udp("10.96.0.10:53", "10.244.1.3:5353"), false},
		{"translated to an endpoint that is gone", udp("10.96.0.10:53", "10.244.1.4:53"), true},
		{"right endpoint address, old target port", udp("10.96.0.10:53", "10.244.1.2:5353"), true},
		{"never translated (created before the rules)", udp("10.96.0.10:53", "10.96.0.10:53"), true},
		{"Service without endpoints: everything is stale", udp("10.96.0.12:53", "10.244.1.2:53"), true},
		{"untranslated to a Service without endpoints", udp("10.96.0.12:53", "10.96.0.12:53"), true},
		{"other port of the Service address", udp("10.96.0.10:54", "10.244.1.9:54"), false},
		{"address that is not a Service", udp("10.244.1.9:53", "10.244.1.9:53"), false},
		{"TCP entry of a UDP Service key", Entry{Proto: unix.IPPROTO_TCP, OrigDst: ap("10.96.0.10:53"), ReplySrc: ap("10.244.1.9:53")}, false},
		{"SCTP to a gone endpoint", Entry{Proto: unix.IPPROTO_SCTP, OrigDst: ap("10.96.0.11:9"), ReplySrc: ap("10.244.1.3:9")}, true},
		{"SCTP to a serving endpoint", Entry{Proto: unix.IPPROTO_SCTP, OrigDst: ap("10.96.0.11:9"), ReplySrc: ap("10.244.1.2:9")}, false},
		{"IPv6 serving", udp("[fd00::10]:53", "[fd00:244::2]:53"), false},
		{"IPv6 gone", udp("[fd00::10]:53", "[fd00:244::3]:53"), true},
		{"4-in-6 forms compare as IPv4", udp("[::ffff:10.96.0.10]:53", "[::ffff:10.244.1.2]:53"), false},
		{"4-in-6 gone", udp("[::ffff:10.96.0.10]:53", "[::ffff:10.244.1.4]:53"), true},
	}
	ix := newIndex(serving)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ix.stale(tt.e); got != tt.want {
				t.Fatalf("stale(%+v) = %v, want %v", tt.e, got, tt.want)
			}
		})
	}
}

func TestToDeleteOnlyUDPAndSCTP(t *testing.T) {
	ap := netip.MustParseAddrPort
	tcp := Service{Proto: unix.IPPROTO_TCP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 80}
	udp := Service{Proto: unix.IPPROTO_UDP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 53}
	ix := newIndex(Serving{tcp: {ap("10.244.1.2:80")}, udp: {ap("10.244.1.2:53")}})
	entries := []Entry{
		{Proto: unix.IPPROTO_TCP, OrigDst: ap("10.96.0.10:80"), ReplySrc: ap("10.244.1.9:80")}, // TCP: the reset moves it
		{Proto: unix.IPPROTO_UDP, OrigDst: ap("10.96.0.10:53"), ReplySrc: ap("10.244.1.9:53")},
		{Proto: unix.IPPROTO_UDP, OrigDst: ap("10.96.0.10:53"), ReplySrc: ap("10.244.1.2:53")},
	}
	for i, want := range []bool{false, true, false} {
		if got := ix.toDelete(entries[i]); got != want {
			t.Errorf("toDelete(%+v) = %v, want %v", entries[i], got, want)
		}
	}
}

func TestDumps(t *testing.T) {
	svc := func(proto uint8, addr string) Service {
		return Service{Proto: proto, Addr: netip.MustParseAddr(addr), Port: 53}
	}
	tests := []struct {
		name    string
		serving Serving
		want    []dump
	}{
		{"nothing", nil, nil},
		{"TCP only: no dump at all", Serving{svc(unix.IPPROTO_TCP, "10.96.0.1"): nil}, nil},
		{"UDP IPv4", Serving{svc(unix.IPPROTO_UDP, "10.96.0.1"): nil, svc(unix.IPPROTO_UDP, "10.96.0.2"): nil}, []dump{{unix.AF_INET, unix.IPPROTO_UDP}}},
		{"4-in-6 is IPv4", Serving{svc(unix.IPPROTO_UDP, "::ffff:10.96.0.1"): nil}, []dump{{unix.AF_INET, unix.IPPROTO_UDP}}},
		{"SCTP IPv6 and UDP IPv4", Serving{svc(unix.IPPROTO_SCTP, "fd00::1"): nil, svc(unix.IPPROTO_UDP, "10.96.0.1"): nil},
			[]dump{{unix.AF_INET, unix.IPPROTO_UDP}, {unix.AF_INET6, unix.IPPROTO_SCTP}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := newIndex(tt.serving).dumps(); !slices.Equal(got, tt.want) {
				t.Fatalf("dumps = %v, want %v", got, tt.want)
			}
		})
	}
}
