package safefile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStamp: a stamp changes with what a watcher must notice (new content, a new
// file renamed over the old one even at the same size, a chmod) and not otherwise.
func TestStamp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	stamp := func() string {
		t.Helper()
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return Stamp(info)
	}
	if err := os.WriteFile(path, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		change  func() error
		changed bool
	}{
		{"untouched", func() error { return nil }, false},
		{"renamed over, same size", func() error {
			if err := os.WriteFile(path+".new", []byte("two"), 0o644); err != nil {
				return err
			}
			return os.Rename(path+".new", path)
		}, true},
		{"chmod", func() error { return os.Chmod(path, 0o600) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := stamp()
			if err := tc.change(); err != nil {
				t.Fatal(err)
			}
			if after := stamp(); (after != before) != tc.changed {
				t.Errorf("stamp %q -> %q, want changed=%v", before, after, tc.changed)
			}
		})
	}
}
