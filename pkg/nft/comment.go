package nft

import (
	"fmt"
	"hash/fnv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxCommentLen is the longest comment nft accepts (NFTNL_UDATA_COMMENT_MAXLEN); the
// kernel bounds all of an object's user data to 256 bytes (NFT_USERDATA_MAXLEN).
const MaxCommentLen = 128

// limitComment returns the comment as written to the kernel and printed: s with
// every '"' made "'" and every control character '?' (see printable), and if that
// does not fit, a deterministic shorter form: the longest valid UTF-8 prefix that
// leaves room for "~" and a hash of the whole comment, so that two long comments
// with the same prefix still differ. It is idempotent, so a comment read back from
// the kernel equals the one written.
func limitComment(s string) string {
	s = printable(s)
	if len(s) <= MaxCommentLen {
		return s
	}
	h := fnv.New32a()
	h.Write([]byte(s))
	suffix := fmt.Sprintf("~%08x", h.Sum32())
	return truncateUTF8(s, MaxCommentLen-len(suffix)) + suffix
}

// truncateUTF8 cuts s to at most n bytes without splitting a character; invalid
// bytes are dropped at the cut.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

// printable makes s something nft can read back between double quotes, on one
// line: nft's quoted strings have no escapes and end at the next '"' (a Service
// port name `pört"x` from a manifest made `nft list` print a table `nft -f` refused),
// a newline splits the listing's line, and a NUL ends the comment the kernel keeps.
// Names that reached the API server never hold any of these.
func printable(s string) string {
	if !strings.ContainsFunc(s, unsafeInComment) {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r == '"':
			return '\''
		case unicode.IsControl(r):
			return '?'
		}
		return r
	}, s)
}

func unsafeInComment(r rune) bool { return r == '"' || unicode.IsControl(r) }
