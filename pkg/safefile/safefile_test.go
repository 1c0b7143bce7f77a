package safefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRead: regular files (and links to them) up to the cap are read; anything
// else is refused at once with an error naming the file and why, a named pipe
// without a writer and /dev/zero included.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	write := func(name, data string) {
		if err := os.WriteFile(at(name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, name string) {
		if err := os.Symlink(target, at(name)); err != nil {
			t.Fatal(err)
		}
	}
	write("ok.yaml", "kind: Service\n")
	write("at-cap.yaml", strings.Repeat("x", 16))
	write("over-cap.yaml", strings.Repeat("x", 17))
	write("empty.yaml", "")
	write("big.yaml", strings.Repeat("x", 2049))
	link("ok.yaml", "link.yaml")
	link("link.yaml", "link2.yaml")
	link("/dev/zero", "zero.yaml")
	link("/dev/null", "null.yaml")
	link("nowhere.yaml", "dangling.yaml")
	link(".", "dir-link.yaml")
	if err := syscall.Mkfifo(at("fifo.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	link("fifo.yaml", "fifo-link.yaml")

	for _, tc := range []struct {
		name    string
		want    string // content, when read
		wantErr string // a part of the error
		check   func(error) bool
	}{
		{name: "ok.yaml", want: "kind: Service\n"},
		{name: "empty.yaml", want: ""},
		{name: "at-cap.yaml", want: strings.Repeat("x", 16)},
		{name: "link.yaml", want: "kind: Service\n"},
		{name: "link2.yaml", want: "kind: Service\n"},
		{name: "over-cap.yaml", wantErr: "over-cap.yaml is 17 bytes, over the cap of 16 bytes: not read",
			check: func(err error) bool { var e *TooLargeError; return errors.As(err, &e) && e.Size == 17 && e.Limit == 16 }},
		{name: "big.yaml", wantErr: "big.yaml is 2049 bytes (2 KiB), over the cap of 16 bytes: not read"},
		{name: "fifo.yaml", wantErr: "fifo.yaml is a named pipe (FIFO), not a regular file: not read",
			check: func(err error) bool { var e *NotRegularError; return errors.As(err, &e) }},
		{name: "fifo-link.yaml", wantErr: "fifo-link.yaml is a named pipe (FIFO), not a regular file"},
		{name: "zero.yaml", wantErr: "zero.yaml is a character device, not a regular file"},
		{name: "null.yaml", wantErr: "null.yaml is a character device, not a regular file"},
		{name: "dir-link.yaml", wantErr: "dir-link.yaml is a directory, not a regular file"},
		{name: "dangling.yaml", wantErr: "no such file", check: func(err error) bool { return errors.Is(err, fs.ErrNotExist) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type result struct {
				data []byte
				err  error
			}
			done := make(chan result, 1)
			go func() {
				data, err := Read(at(tc.name), 16)
				done <- result{data, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Read blocked for 5 s")
			}
			if tc.wantErr == "" {
				if r.err != nil || string(r.data) != tc.want {
					t.Fatalf("Read = %q, %v; want %q", r.data, r.err, tc.want)
				}
				return
			}
			if r.err == nil || !strings.Contains(r.err.Error(), tc.wantErr) {
				t.Fatalf("Read = %q, %v; want an error with %q", r.data, r.err, tc.wantErr)
			}
			if tc.check != nil && !tc.check(r.err) {
				t.Fatalf("error %v (%T) is not of the kind expected", r.err, r.err)
			}
		})
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 bytes", 1023: "1023 bytes", 1024: "1 KiB", 1536: "1.5 KiB",
		3 << 20: "3 MiB", 1<<20 + 1: "1 MiB", 1150 << 20: "1.1 GiB", 200e6: "190.7 MiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
