package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// buildStatic builds ./cmd/svcproxy into out as a static binary (no libc: the
// image has none) for linux/arch, run from the module root.
func buildStatic(out, arch string) error {
	version, err := exec.Command("hack/version-ldflags.sh").Output()
	if err != nil {
		return fmt.Errorf("hack/version-ldflags.sh: %w", err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w "+strings.TrimSpace(string(version)), "-o", out, "./cmd/svcproxy")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/svcproxy: %w", err)
	}
	return nil
}

// sourceTime is the image's creation time: SOURCE_DATE_EPOCH, else the last
// commit's time, so that the same commit builds the same image.
func sourceTime() time.Time {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		out, err := exec.Command("git", "log", "-1", "--format=%ct").Output()
		if err == nil {
			s = strings.TrimSpace(string(out))
		}
	}
	if sec, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(sec, 0).UTC()
	}
	return time.Unix(0, 0).UTC()
}

// gitRevision is the commit the image is built from, "-dirty" when the work
// tree has changes, "" outside a git checkout.
func gitRevision() string {
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	rev := strings.TrimSpace(string(out))
	if err := exec.Command("git", "diff", "--quiet", "HEAD").Run(); err != nil {
		rev += "-dirty"
	}
	return rev
}

// labels are the OCI annotations' keys, as image labels.
func labels(revision string, created time.Time) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "svcproxy",
		"org.opencontainers.image.description": "Kubernetes service proxy programming nftables over netlink; a drop-in for kube-proxy",
		"org.opencontainers.image.source":      "https://github.com/svcproxy/svcproxy",
		"org.opencontainers.image.created":     created.Format(time.RFC3339),
	}
	if revision != "" {
		l["org.opencontainers.image.revision"] = revision
	}
	return l
}
