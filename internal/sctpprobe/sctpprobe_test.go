package sctpprobe

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// The checksum is RFC 9260's CRC32c: recomputing it over the packet with the
// field zeroed gives the stored value, and the known vector of RFC 3720 B.4 (32
// zero bytes) holds for the table used.
func TestInitChecksum(t *testing.T) {
	if got := crc32.Checksum(make([]byte, 32), castagnoli); got != 0x8a9136aa {
		t.Fatalf("CRC32c of 32 zero bytes = %#x, want 0x8a9136aa", got)
	}
	p := Init(40000, 30132, 7)
	stored := binary.LittleEndian.Uint32(p[8:])
	binary.LittleEndian.PutUint32(p[8:], 0)
	if want := crc32.Checksum(p, castagnoli); stored != want {
		t.Fatalf("stored checksum %#x, want %#x", stored, want)
	}
	if binary.BigEndian.Uint16(p[2:]) != 30132 || p[12] != 1 || binary.BigEndian.Uint32(p[16:]) != 7 {
		t.Fatalf("header or chunk wrong: % x", p)
	}
}
