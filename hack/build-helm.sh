#!/usr/bin/env bash
# Builds the helm CLI (helm.sh/helm/v4/cmd/helm of the module test/helm, the
# version whose Go SDK renders the chart in make test) for make e2e-node's
# TestHelmInstall, which installs deploy/helm/svcproxy as a user does. Cached
# like the other binaries, under ${XDG_CACHE_HOME:-$HOME/.cache}/svcproxy-helm/<key>.
# Prints the directory holding it on the last line of stdout.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/lib/k8s-build.sh
source "$root/hack/lib/k8s-build.sh"

k8s_build "helm" "$root/test/helm" svcproxy-helm helm=helm.sh/helm/v4/cmd/helm | tail -n1
