#!/usr/bin/env bash
# Runs every Fuzz* target of the module for FUZZTIME (default 50000x: that many inputs;
# a duration such as 10s works too) each, one after the
# other (go test -fuzz takes one target at a time). Targets are found with
# `go test -list '^Fuzz' ./...`, so new ones anywhere in the module are picked up.
# Seed corpora live in each package's testdata/fuzz/<Target>/; an input that fails
# is written there too, ready to commit as a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
# A count, not a duration, by default: with a duration the fuzzer's own deadline can end
# a run on a loaded machine with "context deadline exceeded" and no failing input.
fuzztime=${FUZZTIME:-50000x}
# -list prints a package's matching names, then "ok  <package> <time>".
listing=$(go test -list '^Fuzz' ./...)
targets=$(awk '/^Fuzz/ { names = names " " $1 } /^ok / { n = split(names, a, " "); for (i = 1; i <= n; i++) print $2, a[i]; names = "" }' <<<"$listing")
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
