package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWithLibrariesMatchesLdd: for programs of this machine, the files
// withLibraries lists are the program plus what ldd says the loader maps.
func TestWithLibrariesMatchesLdd(t *testing.T) {
	if _, err := exec.LookPath("ldd"); err != nil {
		t.Skip("no ldd on this machine to compare with")
	}
	for _, prog := range []string{"/bin/sh", "/usr/bin/ls", "/usr/bin/env"} {
		real, err := filepath.EvalSymlinks(prog)
		if err != nil {
			t.Skipf("%s: %v", prog, err)
		}
		t.Run(prog, func(t *testing.T) {
			got, err := withLibraries([]string{real})
			if err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("ldd", real).Output()
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]bool{real: true}
			for _, line := range strings.Split(string(out), "\n") {
				f := strings.Fields(line)
				switch {
				case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
					want[f[2]] = true
				case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
					want[f[0]] = true
				}
			}
			have := map[string]bool{}
			for _, pair := range got {
				src, dst, _ := strings.Cut(pair, ":")
				if src != dst {
					t.Errorf("%s copied to %s", src, dst)
				}
				have[src] = true
			}
			// ldd names libraries by the path it searched; compare the files.
			resolve := func(m map[string]bool) map[string]bool {
				r := map[string]bool{}
				for p := range m {
					if e, err := filepath.EvalSymlinks(p); err == nil {
						p = e
					}
					r[p] = true
				}
				return r
			}
			h, w := resolve(have), resolve(want)
			for p := range w {
				if !h[p] {
					t.Errorf("missing %s (ldd lists it)", p)
				}
			}
			for p := range h {
				if !w[p] {
					t.Errorf("extra %s (ldd does not list it)", p)
				}
			}
		})
	}
}

func TestWithLibrariesStaticAndMissing(t *testing.T) {
	exe, err := os.Executable() // the test binary: Go, static when CGO is off
	if err != nil {
		t.Fatal(err)
	}
	got, err := withLibraries([]string{exe})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || !strings.HasPrefix(got[0], exe+":") {
		t.Fatalf("got %v, want the program first", got)
	}
	moved, err := withLibraries([]string{exe + ":/usr/sbin/prog"})
	if err != nil || len(moved) == 0 || moved[0] != exe+":/usr/sbin/prog" {
		t.Fatalf("SRC:DST: got %v, %v; want %s put at /usr/sbin/prog first", moved, err, exe)
	}
	if _, err := withLibraries([]string{"/nonexistent/prog"}); err == nil {
		t.Fatal("a missing program: no error")
	}
}
