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
    # A new interesting input is minimized before fuzzing goes on, for up to
    # a minute by default, with no executions counted meanwhile: on a whole
    # manifest that ate most of a 30 s run.
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 3s "$pkg"
  done
done < <(go list ./...)
[ "$found" = 1 ] || echo "fuzz: no fuzz targets"
