#!/usr/bin/env bash
# Runs every fuzz target of the module for the given time (default 30s).
#
# A failure is a finding when the fuzzer wrote the input that caused it
# (testdata/fuzz/<target>/...) or the target itself failed. Go 1.26's fuzz
# coordinator can also end a time-bounded run with a bare "context deadline
# exceeded" when a worker is still busy as -fuzztime expires, under CPU
# contention (go.dev/issue/75804, fixed in Go 1.27): nothing was found then,
# so such a run is tried again, at most twice, before it counts as a failure.
set -euo pipefail
fuzztime=${1:-30s}
found=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# deadline_race reports whether the run logged in $log failed only by the
# coordinator's deadline race: no input written, no failure of the target.
deadline_race() {
  grep -q 'context deadline exceeded' "$log" &&
    ! grep -qE 'Failing input written to|panic:|_test\.go:[0-9]+:' "$log"
}

while read -r pkg; do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
    found=1
    for try in 1 2 3; do
      echo "fuzz: $pkg $target for $fuzztime"
      # A new interesting input is minimized before fuzzing goes on, for up
      # to a minute by default, with no executions counted meanwhile: on a
      # whole manifest that ate most of a 30 s run.
      if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 3s "$pkg" 2>&1 | tee "$log"; then
        break
      fi
      if [ "$try" = 3 ] || ! deadline_race; then
        echo "fuzz: $target failed"
        exit 1
      fi
      echo "fuzz: $target ended on the fuzz coordinator's deadline race with nothing found (go.dev/issue/75804): running it again"
    done
  done
done < <(go list ./...)
[ "$found" = 1 ] || echo "fuzz: no fuzz targets"
