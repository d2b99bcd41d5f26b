#!/usr/bin/env bash
# Times the steps of a long make target and prints them as a table.
#
#   hack/timed.sh STEP COMMAND [ARG...]   run COMMAND, record how long STEP took
#   hack/timed.sh --beside STEP COMMAND [ARG...]
#                                         the same for a step that runs beside
#                                         another, whose time holds it
#   hack/timed.sh --table                 print the table of the steps so far
#   hack/timed.sh --reset                 start a new table
#
# The table lives in $PEERLINK_TEST_TIMES (default bin/test-times.tsv), one
# line per step: seconds, outcome, name, kind (step, beside or test). The
# lab's e2e tests add a line per test to the same file (lab/e2e records it
# when the test's lab is down). The total adds up the steps only: the tests
# and the steps beside another are inside a step's time.
# A step that fails says so in one line and returns its exit status: the
# end of a failed run's log stays the failure's own.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
times=${PEERLINK_TEST_TIMES:-$root/bin/test-times.tsv}

table() {
	[[ -s $times ]] || return 0
	printf '\n%8s  %-4s  %s\n' seconds ok step
	awk -F'\t' '{ printf "%8d  %-4s  %s\n", $1, $2, $3; total += ($4 == "step") ? $1 : 0 }
		END { printf "%8d  %-4s  %s\n", total, "", "total of the steps (e2e tests and steps beside another are inside a step)" }' "$times"
}

case "${1:-}" in
--table)
	table
	exit 0
	;;
--reset)
	mkdir -p "$(dirname "$times")"
	: >"$times"
	exit 0
	;;
--beside) ;;
"" | -*)
	echo "usage: hack/timed.sh [--beside] STEP COMMAND [ARG...] | --table | --reset" >&2
	exit 2
	;;
esac

kind=step
if [[ $1 == --beside ]]; then
	kind=beside
	shift
fi
step=$1
shift
mkdir -p "$(dirname "$times")"
start=$(date +%s)
status=0
"$@" || status=$?
outcome=ok
[[ $status -eq 0 ]] || outcome=FAIL
printf '%d\t%s\t%s\t%s\n' "$(($(date +%s) - start))" "$outcome" "$step" "$kind" >>"$times"
if [[ $status -ne 0 ]]; then
	echo "timed: $step failed after $(($(date +%s) - start)) s (exit $status); the times so far are in $times" >&2
fi
exit "$status"
