package takeover

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLegacyChainNamesOfAnEmptyBlob(t *testing.T) {
	if got := legacyChainNames(nil, 88); got != nil {
		t.Errorf("got %q", got)
	}
	if diff := cmp.Diff([]string(nil), legacyChainNames(make([]byte, 200), 88)); diff != "" {
		t.Error(diff)
	}
}

// FuzzLegacyChainNames: the entry blob comes from the kernel, but its parser must hold
// whatever the bytes, and only ever return names found in them.
func FuzzLegacyChainNames(f *testing.F) {
	entry := func(target string, data string) []byte {
		b := make([]byte, 112+32+32)
		binary.NativeEndian.PutUint16(b[88:], 112)
		binary.NativeEndian.PutUint16(b[90:], uint16(len(b)))
		copy(b[112+2:], target)
		copy(b[112+32:], data)
		return b
	}
	f.Add(append(entry("ERROR", "KUBE-SERVICES"), entry("ERROR", "ERROR")...), 88)
	f.Add(entry("", ""), 140)
	f.Fuzz(func(t *testing.T, blob []byte, field int) {
		field = field & 0xff
		for _, name := range legacyChainNames(blob, field) {
			if !bytes.Contains(blob, []byte(name)) {
				t.Fatalf("name %q not in the blob", name)
			}
		}
	})
}
