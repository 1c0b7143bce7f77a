package nft

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestLimitComment(t *testing.T) {
	long := strings.Repeat("n", 63) + "/" + strings.Repeat("s", 253) + ":http"
	tests := []struct {
		name string
		in   string
	}{
		{"short stays", "default/my-nginx:http"},
		{"exactly the limit stays", strings.Repeat("a", MaxCommentLen)},
		{"one over", strings.Repeat("a", MaxCommentLen+1)},
		{"maximal Kubernetes names", long},
		{"multi-byte characters at the cut", strings.Repeat("é", 100)},
		{"invalid UTF-8", strings.Repeat("\xff", 200)},
		{"a double quote", `ns/web:pört"x/TCP`},
		{"a newline", "ns/web:a\nb/TCP"},
		{"a NUL", "ns/web:a\x00b/TCP"},
		{"control characters", "\t\r\x1b[31m\x7f\u0085"},
		{"quotes past the cut", strings.Repeat(`"`, 200)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := limitComment(tc.in)
			if len(got) > MaxCommentLen {
				t.Fatalf("%d bytes, limit %d", len(got), MaxCommentLen)
			}
			if len(tc.in) <= MaxCommentLen && commentSafe(tc.in) && got != tc.in {
				t.Fatalf("a fitting comment changed: %q", got)
			}
			if !commentSafe(got) {
				t.Fatalf("%q: nft cannot read it back in a quoted string, or it spans lines", got)
			}
			if utf8.ValidString(tc.in) && !utf8.ValidString(got) {
				t.Fatalf("invalid UTF-8: %q", got)
			}
			if limitComment(got) != got {
				t.Fatal("not idempotent: a comment read back would differ")
			}
			if limitComment(tc.in) != got {
				t.Fatal("not deterministic")
			}
		})
	}
	if limitComment(long) == limitComment(long+"x") {
		t.Fatal("two long comments with the same prefix collide")
	}
}

// commentSafe: nft's quoted strings end at the next '"' whatever precedes it (no
// escapes); a control character would split the listing's lines, and a NUL cut
// the comment short when the kernel's copy is read back.
func commentSafe(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r == '"' || unicode.IsControl(r) })
}
