package safefile

import (
	"fmt"
	"io/fs"
	"syscall"
)

// Stamp identifies a file's content cheaply: which inode, how big, when written,
// and its mode (a chmod can make an unreadable file readable). The inode changes when
// a ConfigMap volume swaps `..data` or a writer renames a new file over the old one,
// even if size and mtime happen to match.
func Stamp(info fs.FileInfo) string {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%d:%d:%d:%d:%o", st.Dev, st.Ino, info.Size(), info.ModTime().UnixNano(), info.Mode())
	}
	return fmt.Sprintf("%d:%d:%o", info.Size(), info.ModTime().UnixNano(), info.Mode())
}
