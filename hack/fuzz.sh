#!/usr/bin/env bash
# Runs every Fuzz* target of the module for FUZZTIME (default 50000x: that many inputs;
# a duration such as 10s works too) each, one after the
# other (go test -fuzz takes one target at a time). Targets are found by their
# `func FuzzX(f *testing.F)` lines in the module's test files, so new ones anywhere in
# the module are picked up (`go test -list` linked every package's test binary for it).
# Seed corpora live in each package's testdata/fuzz/<Target>/; an input that fails
# is written there too, ready to commit as a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
# A count, not a duration, by default: with a duration the fuzzer's own deadline can end
# a run on a loaded machine with "context deadline exceeded" and no failing input.
fuzztime=${FUZZTIME:-50000x}
# "./DIR/x_test.go:func FuzzName(f *testing.F) {" becomes "./DIR FuzzName".
targets=$(grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . |
  sed -E 's|^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*|\1 \2|' | sort -u)
if [ -z "$targets" ]; then
  echo "fuzz: no Fuzz targets found"
  exit 1
fi
count=0
while read -r pkg target; do
  echo "fuzz: $pkg $target for $fuzztime"
  go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
  count=$((count + 1))
done <<<"$targets"
echo "fuzz: $count targets passed"
