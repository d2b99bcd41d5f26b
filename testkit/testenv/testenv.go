package testenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// rootModule is the module of the repository.
const rootModule = "github.com/peerlink/peerlink"

// RepoRoot returns the root of the peerlink repository that holds the
// working directory: go test runs each package in its own directory, the
// lab and the benchmarks run from anywhere inside the checkout.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("get working directory: %w", err)
	}
	return repoRoot(wd)
}

// repoRoot walks up from dir to the directory whose go.mod declares the root
// module; the modules nested in the repository (hack/kube) are passed over.
func repoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("absolute path: %w", err)
	}
	for d := dir; ; {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && modulePath(data) == rootModule {
			return d, nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("read go.mod: %w", err)
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod of module %s in %s or above: run from the peerlink checkout", rootModule, dir)
		}
		d = parent
	}
}

// modulePath returns the path of the module directive of a go.mod file.
func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			if p, err := strconv.Unquote(fields[1]); err == nil {
				return p
			}
			return fields[1]
		}
	}
	return ""
}
