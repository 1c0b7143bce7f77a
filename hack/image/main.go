// Command image builds svcproxy's container image without a container engine
// and writes it as an image archive that both `kind load image-archive` and
// `ctr images import` load (the docker-save layout: manifest.json, the config,
// gzip layers). The image is the static binary on an empty base, at /svcproxy
// (the entrypoint) and /usr/local/bin/kube-proxy (where kubeadm's kube-proxy
// DaemonSet runs its binary). `make image` runs it; deploy/Dockerfile builds
// the same image with a container engine.
//
//	go run ./hack/image [-o bin/svcproxy-image.tar] [-tag svcproxy:dev] [-binary FILE] [-copy]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

func main() { os.Exit(run()) }

func run() int {
	out := flag.String("o", "bin/svcproxy-image.tar", "image archive to write")
	tag := flag.String("tag", "svcproxy:dev", "the image's name in the archive")
	binary := flag.String("binary", "", "static svcproxy binary to put in the image (default: build ./cmd/svcproxy)")
	copyAlias := flag.Bool("copy", false, "store /usr/local/bin/kube-proxy as a second copy instead of a hard link")
	flag.Parse()

	if err := build(*out, *tag, *binary, *copyAlias); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		return 1
	}
	return 0
}

func build(out, tag, binary string, copyAlias bool) error {
	if binary == "" {
		dir, err := os.MkdirTemp("", "svcproxy-image-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "svcproxy")
		if err := buildStatic(binary, runtime.GOARCH); err != nil {
			return err
		}
	}
	content, err := os.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("read binary: %w", err)
	}
	created, revision := sourceTime(), gitRevision()
	img, err := newImage(imageSpec{
		Binary:    content,
		Arch:      runtime.GOARCH,
		Created:   created,
		Labels:    labels(revision, created),
		CopyAlias: copyAlias,
	})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := writeArchive(out, tag, img); err != nil {
		return err
	}
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	layerSize, err := compressedSize(img)
	if err != nil {
		return err
	}
	fmt.Printf("image %s: %s, %.1f MiB (binary %.1f MiB, compressed layer %.1f MiB)\n",
		tag, out, mib(st.Size()), mib(int64(len(content))), mib(layerSize))
	return nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
