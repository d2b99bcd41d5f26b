#!/usr/bin/env bash
# Prints, from the output of a failed `go test` run, the lines that failed
# it: each `--- FAIL` line, each line a test logged from a call of Error,
# Errorf, Fatal or Fatalf (told from its file:line), the last line a test
# logged before its `--- FAIL` (a helper's Fatal reports its caller's
# line), and the waits that failed, which the lab tests say again after
# their diagnostics. A failed lab
# test prints its diagnostics after its errors, hundreds of lines that would
# push them out of the end of a log; this says them again, last.
#
#   hack/failures.sh OUTPUT PACKAGE_DIR
set -euo pipefail

out=$1
dir=$2
echo "===== what failed (the errors of $out, again):"
awk -v dir="$dir" '
	/^[[:space:]]*--- FAIL/ {
		if (last != "" && !(last in said)) print last
		last = ""
		print
		next
	}
	/ ===== .* failed: / { print; next }
	match($0, /^[[:space:]]+[A-Za-z0-9_]+_test\.go:[0-9]+: /) {
		split(substr($0, RSTART, RLENGTH), loc, ":")
		file = loc[1]; gsub(/^[[:space:]]+/, "", file)
		key = file ":" loc[2]
		if (!(key in failing)) {
			failing[key] = 0
			n = 0
			while ((getline line < (dir "/" file)) > 0) {
				if (++n == loc[2]) {
					failing[key] = line ~ /\.(Error|Errorf|Fatal|Fatalf)\(/
					break
				}
			}
			close(dir "/" file)
		}
		if (failing[key]) {
			print
			said[$0] = 1
		}
		if (file != "lab_test.go") last = $0
	}
' "$out"
