#!/usr/bin/env bash
# make test: installs what the tests need, then runs every unit and kernel test.
# Kernel tests create and remove their own network namespaces; as non-root they skip.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/deps.sh
unformatted=$(gofmt -l cmd pkg internal hack deploy test)
if [ -n "$unformatted" ]; then echo "gofmt needed:"; echo "$unformatted"; exit 1; fi
go vet ./...
go test -race -count=1 -timeout 15m ./...
# The Helm chart's render test: a module of its own, so that Helm's
# dependencies stay out of svcproxy's go.mod (docs/helm.md).
(cd test/helm && go vet ./... && go test -count=1 ./...)
hack/fuzz.sh
