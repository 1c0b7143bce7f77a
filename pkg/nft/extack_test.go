package nft

import (
	"syscall"
	"testing"

	"github.com/svcproxy/svcproxy/internal/nlkit"
	"github.com/svcproxy/svcproxy/internal/nlkit/nlkittest"
)

var ackBytes = nlkittest.AckBytes

// FuzzParseAck feeds arbitrary bytes to the reply decoders, as a hostile or buggy
// kernel might: they must never panic, and what they decode must stay in bounds.
func FuzzParseAck(f *testing.F) {
	f.Add(ackBytes(0, 7, "", 0, nlkit.Capped))
	f.Add(ackBytes(syscall.ERANGE, 9, "Attribute failed policy validation", 48, nlkit.Capped|nlkit.AckTLVs))
	f.Add(ackBytes(syscall.ENOENT, 3, "x", 0, nlkit.AckTLVs))
	f.Add(append(ackBytes(0, 1, "", 0, nlkit.Capped), ackBytes(syscall.EEXIST, 2, "y", 24, nlkit.Capped|nlkit.AckTLVs)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, _ := nlkit.Split(b)
		for _, m := range msgs {
			if len(m.Data) > len(b) {
				t.Fatalf("message data of %d bytes from %d input bytes", len(m.Data), len(b))
			}
			a, err := nlkit.ParseAck(m)
			if err == nil && (a.Errno < 0 || a.Errno > 4095 || len(a.Msg) > len(b)) {
				t.Fatalf("decoded out of range: %+v", a)
			}
			// What a refused message would be described with must not panic either.
			_ = elementKeys(m.Data, 0, a)
		}
	})
}
