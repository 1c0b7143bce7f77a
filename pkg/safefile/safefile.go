// Package safefile reads files whose names a user gave (a --config file, the
// manifests of a directory) without trusting what the name points to: only a
// regular file is read (through symlinks), never more than a cap, and opening it
// never blocks. os.ReadFile on a named pipe blocks in open until a writer comes,
// and on /dev/zero reads until memory runs out.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// NotRegularError says that a name resolves to something other than a regular
// file: a named pipe, a device, a socket or a directory.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file: not read", e.Path, kind(e.Mode))
}

// TooLargeError says that a file holds more than the cap.
type TooLargeError struct {
	Path string
	// Size is the file's size, or how much of it was read before it proved larger
	// than Limit (a file that grows while it is read).
	Size  int64
	Limit int64
}

func (e *TooLargeError) Error() string {
	size := fmt.Sprintf("%d bytes", e.Size)
	if e.Size >= 1024 {
		size += " (" + Bytes(e.Size) + ")"
	}
	return fmt.Sprintf("%s is %s, over the cap of %s: not read", e.Path, size, Bytes(e.Limit))
}

// Check returns the error Read would return for a file that os.Stat (or Fstat)
// describes as info, or nil.
func Check(path string, info fs.FileInfo, limit int64) error {
	if !info.Mode().IsRegular() {
		return &NotRegularError{Path: path, Mode: info.Mode()}
	}
	if info.Size() > limit {
		return &TooLargeError{Path: path, Size: info.Size(), Limit: limit}
	}
	return nil
}

// Read returns the content of path if it resolves, through symlinks, to a regular
// file of at most limit bytes; otherwise a *NotRegularError or *TooLargeError (or
// the error of stat, open or read). It looks before it opens (a stat), opens with
// O_NONBLOCK so that a named pipe swapped in meanwhile cannot hold the open, checks
// what it opened (an fstat), and reads at most limit+1 bytes.
func Read(path string, limit int64) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := Check(path, info, limit); err != nil {
		return nil, err
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if info, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := Check(path, info, limit); err != nil {
		return nil, err // replaced between the stat and the open
	}
	buf := make([]byte, 0, info.Size()+1)
	for int64(len(buf)) <= limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grows: the file grew since the fstat
		}
		room := min(int64(cap(buf)), limit+1)
		n, err := f.Read(buf[len(buf):room])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return nil, &TooLargeError{Path: path, Size: int64(len(buf)), Limit: limit}
}

// kind names what a non-regular mode is, for errors.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return fmt.Sprintf("of mode %s", m)
}

// Bytes prints a size for people: 3 MiB, 1.5 GiB, 812 bytes.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	s := fmt.Sprintf("%.1f", float64(n)/float64(div))
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		s = s[:len(s)-2]
	}
	return s + " " + []string{"KiB", "MiB", "GiB", "TiB", "PiB"}[exp]
}
