// Command imagebuild writes an image archive (the docker-save layout that
// `ctr images import` loads) of one layer made of files from this machine,
// without a container engine. The node suite builds its pause, echo server
// and kube-proxy images with it, and the conformance run upstream's test
// images; svcproxy's image comes from hack/image.
//
//	imagebuild -o out.tar -tag name:tag -entrypoint /bin/x [-cmd "a b"] [-env K=V]...
//	  [-file SRC:DST]... [-bin PATH]... [-link DST:TARGET]... [-dir DST]...
//
// -file copies SRC's content (symlinks followed) to DST with SRC's mode; -bin
// copies a program of this machine to the same path (or SRC to DST) together with the shared
// libraries and the loader it needs (see libs.go); -link makes DST a symlink
// to TARGET; -dir makes an empty directory (mode 1777: /tmp). Parent
// directories are created.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type pairs []string

func (p *pairs) String() string     { return strings.Join(*p, ",") }
func (p *pairs) Set(s string) error { *p = append(*p, s); return nil }

func main() {
	out := flag.String("o", "", "image archive to write")
	tag := flag.String("tag", "", "the image's name in the archive")
	entry := flag.String("entrypoint", "", "the image's entrypoint, space separated")
	cmd := flag.String("cmd", "", "the image's command (CMD), space separated")
	var files, bins, links, envs, dirs pairs
	flag.Var(&files, "file", "SRC:DST, a file of this machine put at DST (repeatable)")
	flag.Var(&bins, "bin", "PATH or SRC:DST, a program with the shared libraries of this machine it needs (repeatable)")
	flag.Var(&dirs, "dir", "DST, an empty directory, mode 1777 (repeatable)")
	flag.Var(&links, "link", "DST:TARGET, a symlink (repeatable)")
	flag.Var(&envs, "env", "NAME=VALUE in the image's environment (repeatable)")
	flag.Parse()
	if *out == "" || *tag == "" {
		fmt.Fprintln(os.Stderr, "imagebuild: -o and -tag are required")
		os.Exit(2)
	}
	withLibs, err := withLibraries(bins)
	if err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
	files = append(files, withLibs...)
	img := imageConfig{entrypoint: strings.Fields(*entry), cmd: strings.Fields(*cmd), env: envs}
	if err := build(*out, *tag, img, files, links, dirs); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

type imageConfig struct{ entrypoint, cmd, env []string }

func build(out, tag string, c imageConfig, files, links, emptyDirs []string) error {
	layerTar, err := rootfs(files, links, emptyDirs)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	created := time.Unix(0, 0).UTC()
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: created},
		Config:       v1.Config{Entrypoint: c.entrypoint, Cmd: c.cmd, Env: c.env},
		RootFS:       v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "test/e2enode/imagebuild"}})
	if err != nil {
		return fmt.Errorf("append layer: %w", err)
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("image name %q: %w", tag, err)
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	size, err := layer.Size()
	if err != nil {
		return err
	}
	fmt.Printf("image %s: %s, %.1f MiB (compressed layer %.1f MiB)\n", tag, out, mib(st.Size()), mib(size))
	return nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// rootfs is the layer: every parent directory once, then the files (each
// destination once) and links.
func rootfs(files, links, emptyDirs []string) ([]byte, error) {
	type entry struct {
		hdr  *tar.Header
		body []byte
	}
	var entries []entry
	dirs := map[string]bool{}
	addDirs := func(p string) {
		for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
			dirs[strings.TrimPrefix(d, "/")+"/"] = true
		}
	}
	placed := map[string]bool{}
	for _, f := range files {
		src, dst, ok := strings.Cut(f, ":")
		if !ok {
			return nil, fmt.Errorf("-file %q: want SRC:DST", f)
		}
		if placed[dst] {
			continue // the first wins: -file before the libraries -bin adds
		}
		placed[dst] = true
		body, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		st, err := os.Stat(src)
		if err != nil {
			return nil, err
		}
		addDirs(dst)
		entries = append(entries, entry{&tar.Header{Name: strings.TrimPrefix(dst, "/"), Typeflag: tar.TypeReg, Mode: int64(st.Mode().Perm()), Size: int64(len(body))}, body})
	}
	for _, l := range links {
		dst, target, ok := strings.Cut(l, ":")
		if !ok {
			return nil, fmt.Errorf("-link %q: want DST:TARGET", l)
		}
		addDirs(dst)
		entries = append(entries, entry{hdr: &tar.Header{Name: strings.TrimPrefix(dst, "/"), Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}})
	}
	for _, d := range emptyDirs {
		addDirs(d)
		entries = append(entries, entry{hdr: &tar.Header{Name: strings.Trim(d, "/") + "/", Typeflag: tar.TypeDir, Mode: 0o1777}})
	}
	var dirList []string
	for d := range dirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList) // parents before children
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	for _, d := range dirList {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	for _, e := range entries {
		e.hdr.ModTime, e.hdr.Format = mtime, tar.FormatPAX
		if err := tw.WriteHeader(e.hdr); err != nil {
			return nil, fmt.Errorf("tar %s: %w", e.hdr.Name, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, fmt.Errorf("tar %s: %w", e.hdr.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
