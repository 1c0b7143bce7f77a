package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const (
	// Entrypoint is where the binary lives and what the image runs.
	Entrypoint = "/svcproxy"
	// KubeProxyPath is kube-proxy's binary in kubeadm's DaemonSet: the same
	// binary, so that the image replaces kube-proxy's.
	KubeProxyPath = "/usr/local/bin/kube-proxy"
)

type imageSpec struct {
	Binary    []byte
	Arch      string
	Created   time.Time
	Labels    map[string]string
	CopyAlias bool // KubeProxyPath as a copy, not a hard link
}

// newImage is one layer on an empty base: the binary at Entrypoint and
// KubeProxyPath, no shell, no libc, no user database (runs as root, with the
// capabilities the pod grants).
func newImage(s imageSpec) (v1.Image, error) {
	rootfs, err := rootfsTar(s.Binary, s.Created, s.CopyAlias)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(rootfs)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: s.Arch,
		OS:           "linux",
		Created:      v1.Time{Time: s.Created},
		Config: v1.Config{
			Entrypoint: []string{Entrypoint},
			Labels:     s.Labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: s.Created},
			CreatedBy: "hack/image: svcproxy at " + Entrypoint + " and " + KubeProxyPath,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	return img, nil
}

// rootfsTar is the layer's content. Directories are listed so that the
// runtime creates them with the usual modes; the kube-proxy path is a hard link
// unless copyAlias, which nearly doubles the image (see docs/kind.md).
func rootfsTar(binary []byte, mtime time.Time, copyAlias bool) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := func(name string, typ byte, mode int64) *tar.Header {
		return &tar.Header{Name: name, Typeflag: typ, Mode: mode, ModTime: mtime, Format: tar.FormatPAX}
	}
	entries := []struct {
		h    *tar.Header
		body []byte
	}{
		{h: hdr("svcproxy", tar.TypeReg, 0o755), body: binary},
		{h: hdr("usr/", tar.TypeDir, 0o755)},
		{h: hdr("usr/local/", tar.TypeDir, 0o755)},
		{h: hdr("usr/local/bin/", tar.TypeDir, 0o755)},
	}
	alias := hdr("usr/local/bin/kube-proxy", tar.TypeLink, 0o755)
	alias.Linkname = "svcproxy"
	var aliasBody []byte
	if copyAlias {
		alias.Typeflag, alias.Linkname, aliasBody = tar.TypeReg, "", binary
	}
	entries = append(entries, struct {
		h    *tar.Header
		body []byte
	}{alias, aliasBody})
	for _, e := range entries {
		e.h.Size = int64(len(e.body))
		if err := tw.WriteHeader(e.h); err != nil {
			return nil, fmt.Errorf("tar %s: %w", e.h.Name, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, fmt.Errorf("tar %s: %w", e.h.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeArchive writes img named tag in the docker-save layout, which kind
// (through ctr) and ctr import.
func writeArchive(path, tag string, img v1.Image) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("image name %q: %w", tag, err)
	}
	if err := tarball.WriteToFile(path, ref, img); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// compressedSize is what a node downloads or imports: the layers' gzip size.
func compressedSize(img v1.Image) (int64, error) {
	layers, err := img.Layers()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, l := range layers {
		s, err := l.Size()
		if err != nil {
			return 0, err
		}
		n += s
	}
	return n, nil
}
