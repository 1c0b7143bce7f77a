//go:build e2e

package e2e

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// imageConfig returns what the config of the image tag in the archive
// tarPath gives a container: entrypoint, cmd, env, user.
func imageConfig(tarPath, tag string) (imageDefaults, error) {
	img, err := imageFrom(tarPath, tag)
	if err != nil {
		return imageDefaults{}, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return imageDefaults{}, err
	}
	return imageDefaults{entrypoint: cfg.Config.Entrypoint, cmd: cfg.Config.Cmd, env: cfg.Config.Env, user: cfg.Config.User}, nil
}

func imageFrom(tarPath, tag string) (v1.Image, error) {
	ref, err := name.NewTag(tag)
	if err != nil {
		return nil, err
	}
	img, err := tarball.ImageFromPath(tarPath, &ref)
	if err != nil {
		return nil, fmt.Errorf("image %s in %s: %w", tag, tarPath, err)
	}
	return img, nil
}

// imageFile extracts the file at path (absolute, as the container sees it)
// from the image tag in the archive tarPath into dst, following a hard link
// to the file it names.
func imageFile(tarPath, tag, path, dst string) error {
	img, err := imageFrom(tarPath, tag)
	if err != nil {
		return err
	}
	want := strings.TrimPrefix(path, "/")
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return fmt.Errorf("%s not in image %s", path, tag)
		}
		if err != nil {
			return err
		}
		if filepath.Clean(h.Name) != want {
			continue
		}
		switch h.Typeflag {
		case tar.TypeLink:
			return imageFile(tarPath, tag, "/"+h.Linkname, dst)
		case tar.TypeReg:
		default:
			return fmt.Errorf("%s in image %s is not a regular file (type %c)", path, tag, h.Typeflag)
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o7777)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
}
