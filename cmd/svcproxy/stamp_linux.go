package main

import (
	"fmt"
	"io/fs"
	"syscall"
)

// fileStamp identifies a file's content cheaply: which inode, how big, when written.
// The inode changes when a ConfigMap volume swaps `..data` or a writer renames a
// new file over the old one, even if size and mtime happen to match.
func fileStamp(info fs.FileInfo) string {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%d:%d:%d:%d", st.Dev, st.Ino, info.Size(), info.ModTime().UnixNano())
	}
	return fmt.Sprintf("%d:%d", info.Size(), info.ModTime().UnixNano())
}
