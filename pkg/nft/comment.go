package nft

import (
	"fmt"
	"hash/fnv"
	"unicode/utf8"
)

// MaxCommentLen is the longest comment nft accepts (NFTNL_UDATA_COMMENT_MAXLEN); the
// kernel bounds all of an object's user data to 256 bytes (NFT_USERDATA_MAXLEN).
const MaxCommentLen = 128

// limitComment returns s if it fits, else a deterministic shorter form: the longest
// valid UTF-8 prefix that leaves room for "~" and a hash of the whole comment, so
// that two long comments with the same prefix still differ. It is idempotent, so a
// comment read back from the kernel equals the one written.
func limitComment(s string) string {
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
