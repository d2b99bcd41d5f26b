#!/usr/bin/env bash
# Runs every fuzz target of the module for the given time (default 30s).
set -euo pipefail
fuzztime=${1:-30s}
found=0
while read -r pkg; do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
    found=1
    echo "fuzz: $pkg $target for $fuzztime"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
  done
done < <(go list ./...)
[ "$found" = 1 ] || echo "fuzz: no fuzz targets"
