package testenv

import (
	"os/exec"
	"strings"
	"testing"
)

// harness is the tree of test machinery: only tests, the benchmarks and
// the lab may import its packages.
var harness = []string{rootModule + "/testkit"}

// isIn reports whether pkg is one of roots or below one.
func isIn(pkg string, roots ...string) bool {
	for _, r := range roots {
		if pkg == r || strings.HasPrefix(pkg, r+"/") {
			return true
		}
	}
	return false
}

// The product's packages hold no test harness and pull none in.
func TestProductImportsNoHarness(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, " ")
		if isIn(pkg, append(harness, rootModule+"/lab", rootModule+"/bench")...) {
			continue
		}
		for _, dep := range strings.Fields(deps) {
			if isIn(dep, harness...) {
				t.Errorf("%s imports the test harness %s", pkg, dep)
			}
		}
	}
}
