package main

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// libDirs is where this machine's loader finds libraries (Debian, amd64 and
// arm64), searched after a program's own RUNPATH.
var libDirs = []string{
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
	"/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
	"/lib64", "/usr/lib64", "/lib", "/usr/lib",
}

// withLibraries returns -file pairs (SRC:DST) for each program (PATH, put at
// the same path, or SRC:DST: a program unpacked elsewhere) and everything the
// dynamic loader would map for it, at this machine's paths: its ELF
// interpreter and its DT_NEEDED libraries, transitively. Each path is listed
// once. Statically linked programs need nothing more.
func withLibraries(programs []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	var visit func(src, dst string) error
	visit = func(src, dst string) error {
		if seen[dst] {
			return nil
		}
		seen[dst] = true
		out = append(out, src+":"+dst)
		needed, interp, runpath, err := elfDeps(src)
		if err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		if interp != "" {
			if err := visit(interp, interp); err != nil {
				return err
			}
		}
		for _, lib := range needed {
			found, err := findLib(lib, runpath)
			if err != nil {
				return fmt.Errorf("%s needs %s: %w", src, lib, err)
			}
			if err := visit(found, found); err != nil {
				return err
			}
		}
		return nil
	}
	for _, p := range programs {
		src, dst, ok := strings.Cut(p, ":")
		if !ok {
			dst = src
		}
		if err := visit(src, dst); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// elfDeps reads a program's or library's interpreter, DT_NEEDED entries and
// DT_RUNPATH/DT_RPATH directories ($ORIGIN expanded).
func elfDeps(path string) (needed []string, interp string, runpath []string, err error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, "", nil, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return nil, "", nil, fmt.Errorf("PT_INTERP: %w", err)
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	if f.Section(".dynamic") == nil {
		return nil, interp, nil, nil // static
	}
	if needed, err = f.ImportedLibraries(); err != nil {
		return nil, "", nil, err
	}
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		vals, err := f.DynString(tag)
		if err != nil {
			return nil, "", nil, err
		}
		for _, v := range vals {
			for _, d := range strings.Split(v, ":") {
				runpath = append(runpath, strings.ReplaceAll(d, "$ORIGIN", filepath.Dir(path)))
			}
		}
	}
	return needed, interp, runpath, nil
}

func findLib(name string, runpath []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, d := range append(runpath, libDirs...) {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("not found in %v", append(runpath, libDirs...))
}
