package testenv

import (
	"os"
	"testing"
)

// RequireEnv set to 1 turns the skip of a test whose environment is missing
// into a failure.
const RequireEnv = "PEERLINK_REQUIRE_PRIVILEGED"

// Require skips t, or fails it under RequireEnv=1, when missing is not nil:
// what the test needs and does not have. Under -short, a test with such
// needs is skipped whatever the machine has.
func Require(t testing.TB, what string, missing error) {
	t.Helper()
	if testing.Short() {
		t.Skipf("%s: skipped under -short", what)
	}
	if missing == nil {
		return
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s cannot run: %v", what, missing)
	}
	t.Skipf("%s skipped: %v", what, missing)
}
