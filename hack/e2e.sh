#!/usr/bin/env bash
# Runs one phase of the lab's e2e tests (lab/e2e, PEERLINK_E2E_PHASE), with
# other commands beside it.
#
#   hack/e2e.sh side-by-side|alone [COMMAND...]
#
# Each COMMAND (one shell command line per argument) starts with the tests
# and runs beside them; the script waits for all of them and fails if the
# tests or any of them failed. make test runs the tests that bound no time
# side by side, $E2E_PARALLEL at once, with the builds only the later
# phase needs and the fuzz targets beside them: the lab's tests mostly wait,
# so they leave CPU to spare. The tests that bound a time then run alone,
# with nothing beside them.
#
# The output goes to bin/e2e-PHASE.log as well; after a failure, the lines
# that failed it are said again at the end (hack/failures.sh).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
phase=${1:-}
case "$phase" in
side-by-side | alone) shift ;;
*)
	echo "usage: hack/e2e.sh side-by-side|alone [COMMAND...]" >&2
	exit 2
	;;
esac

pids=()
for cmd in "$@"; do
	bash -c "$cmd" &
	pids+=("$!")
done

log=bin/e2e-$phase.log
mkdir -p bin
status=0
PEERLINK_E2E_PHASE=$phase ${GO:-go} test -count=1 -timeout 60m -parallel "${E2E_PARALLEL:-3}" ./lab/e2e 2>&1 | tee "$log" || status=$?
if [[ $status -ne 0 ]]; then
	hack/failures.sh "$log" lab/e2e
fi
for pid in "${pids[@]}"; do
	wait "$pid" || status=1
done
exit "$status"
