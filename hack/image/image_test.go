package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImage builds the image as `make image` does, from the real binary, and
// reads the archive back: its name, config, and the files a container sees.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds svcproxy")
	}
	// go test runs in hack/image; the build runs from the module root.
	t.Chdir("../..")
	out := filepath.Join(t.TempDir(), "image.tar")
	if err := build(out, "svcproxy:test", "", false); err != nil {
		t.Fatal(err)
	}

	if got := repoTags(t, out); !slices.Equal(got, []string{"svcproxy:test"}) {
		t.Errorf("archive names %q, want [svcproxy:test] (what kind and ctr import it as)", got)
	}
	ref, err := name.NewTag("svcproxy:test")
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, &ref)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{Entrypoint}) || len(cfg.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [%s] and none", cfg.Config.Entrypoint, cfg.Config.Cmd, Entrypoint)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
	}
	if cfg.Config.Labels["org.opencontainers.image.title"] != "svcproxy" || cfg.Config.Labels["org.opencontainers.image.source"] == "" {
		t.Errorf("labels %v", cfg.Config.Labels)
	}

	files := extract(t, img)
	var paths []string
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	want := []string{"svcproxy", "usr", "usr/local", "usr/local/bin", "usr/local/bin/kube-proxy"}
	if !slices.Equal(paths, want) {
		t.Errorf("image holds %q, want only %q (no shell, no libc)", paths, want)
	}
	bin := files["svcproxy"]
	if bin == nil || bin.hdr.Mode&0o111 == 0 {
		t.Fatalf("/svcproxy missing or not executable")
	}
	if alias := files["usr/local/bin/kube-proxy"]; alias == nil || alias.hdr.Typeflag != tar.TypeLink || alias.hdr.Linkname != "svcproxy" {
		t.Errorf("/usr/local/bin/kube-proxy is not a hard link to /svcproxy: %+v", alias)
	}

	// Static (no program interpreter: the image has no libc), and it is
	// svcproxy: it runs and renders the seed example.
	f, err := elf.NewFile(bytes.NewReader(bin.body))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("/svcproxy is dynamically linked")
		}
	}
	exe := filepath.Join(t.TempDir(), "svcproxy")
	if err := os.WriteFile(exe, bin.body, 0o755); err != nil {
		t.Fatal(err)
	}
	rendered, err := exec.Command(exe, "render").CombinedOutput()
	if err != nil || !strings.Contains(string(rendered), "table ip svcproxy") {
		t.Errorf("/svcproxy render: %v\n%s", err, rendered)
	}
}

type entry struct {
	hdr  *tar.Header
	body []byte
}

func extract(t *testing.T, img v1.Image) map[string]*entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]*entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = &entry{hdr: h, body: body}
	}
}

// repoTags reads manifest.json, the docker-save index that kind and ctr use.
func repoTags(t *testing.T, archive string) []string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("manifest.json: %v", err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var m []struct{ RepoTags []string }
		if err := json.NewDecoder(tr).Decode(&m); err != nil || len(m) != 1 {
			t.Fatalf("manifest.json: %v (%d images)", err, len(m))
		}
		return m[0].RepoTags
	}
}

// TestRootfsCopy: -copy stores the kube-proxy path as a second regular file.
func TestRootfsCopy(t *testing.T) {
	for _, copyAlias := range []bool{false, true} {
		b, err := rootfsTar([]byte("binary"), time.Unix(0, 0), copyAlias)
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(bytes.NewReader(b))
		var alias *tar.Header
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Name == "usr/local/bin/kube-proxy" {
				alias = h
			}
		}
		wantType, wantSize := byte(tar.TypeLink), int64(0)
		if copyAlias {
			wantType, wantSize = tar.TypeReg, int64(len("binary"))
		}
		if alias == nil || alias.Typeflag != wantType || alias.Size != wantSize {
			t.Errorf("copy=%v: kube-proxy entry %+v, want type %c size %d", copyAlias, alias, wantType, wantSize)
		}
	}
}
