#!/usr/bin/env bash
# Prints the -ldflags that stamp svcproxy's version into k8s.io/component-base/version,
# which --version, the "Version info" log line and the kubernetes_build_info metric
# report (unstamped, component-base says v0.0.0-master+$Format:%H$).
# Use: go build -ldflags "$(hack/version-ldflags.sh)" ./cmd/svcproxy
# SOURCE_DATE_EPOCH, when set, fixes the build date (reproducible builds).
set -euo pipefail
cd "$(dirname "$0")/.."

commit=$(git rev-parse HEAD 2>/dev/null || echo 0000000000000000000000000000000000000000)
if [[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then tree=clean; else tree=dirty; fi
# A release tag (vX.Y.Z) when there is one, else a semver pre-release of v0.0.0.
version=$(git describe --tags --match 'v[0-9]*' 2>/dev/null || echo "v0.0.0-master+${commit:0:12}")
if [[ $tree == dirty ]]; then version+="-dirty"; fi
major="${version#v}"; major="${major%%.*}"
minor="${version#v*.}"; minor="${minor%%.*}"
date=$(date -u ${SOURCE_DATE_EPOCH:+-d "@$SOURCE_DATE_EPOCH"} +%Y-%m-%dT%H:%M:%SZ)

pkg=k8s.io/component-base/version
echo "-X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor" \
	"-X $pkg.gitCommit=$commit -X $pkg.gitTreeState=$tree -X $pkg.buildDate=$date"
