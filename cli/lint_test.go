package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lintArgs is the command line that lints a case directory: the directory
// itself, or its local/ bundle with peer/ as --peer-bundle.
func lintArgs(dir string) []string {
	if _, err := os.Stat(filepath.Join(dir, "local")); err == nil {
		return []string{"lint", filepath.Join(dir, "local"), "--peer-bundle", filepath.Join(dir, "peer")}
	}
	return []string{"lint", dir}
}

func TestLintGood(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join(repoRoot, "testdata", "bundles", "good", "*"))
	if err != nil || len(cases) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, dir := range cases {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			stdout, stderr, code := runCLI(t, lintArgs(dir)...)
			if code != 0 || stdout != "no findings\n" {
				t.Fatalf("exit code %d, stdout:\n%s\nstderr: %s", code, stdout, stderr)
			}
		})
	}
	t.Run("examples", func(t *testing.T) {
		examples := filepath.Join(repoRoot, "bundles", "examples")
		stdout, stderr, code := runCLI(t, "lint", filepath.Join(examples, "cluster-a", "peer-cluster-b"),
			"--peer-bundle", filepath.Join(examples, "cluster-b", "peer-cluster-a"))
		if code != 0 || stdout != "no findings\n" {
			t.Fatalf("exit code %d, stdout:\n%s\nstderr: %s", code, stdout, stderr)
		}
	})
}

// TestLintBad lints every seeded mistake: each must be reported with its
// own message, as in the case's golden file.
func TestLintBad(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join(repoRoot, "testdata", "bundles", "bad", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 12 {
		t.Fatalf("%d seeded mistakes, want at least 12", len(cases))
	}
	seen := map[string]string{}
	for _, dir := range cases {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			stdout, stderr, code := runCLI(t, lintArgs(dir)...)
			if code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if !strings.HasPrefix(stderr, "error: ") || strings.Count(stderr, "\n") != 1 {
				t.Errorf("stderr is not one error line: %q", stderr)
			}
			// Paths as this machine spells them are left out of the golden file.
			abs, err := filepath.Abs(dir)
			if err != nil {
				t.Fatal(err)
			}
			out := strings.ReplaceAll(stdout, dir+string(filepath.Separator), "")
			out = strings.ReplaceAll(out, abs+string(filepath.Separator), "")
			if out == "" {
				t.Fatal("no finding")
			}
			if other, dup := seen[out]; dup {
				t.Errorf("same findings as case %s: each mistake needs its own message", other)
			}
			seen[out] = filepath.Base(dir)
			golden(t, filepath.Join(dir, "expected"), []byte(out))
		})
	}
}

// TestLintWarnings lints bundles that work, but not as written: each
// warning is printed as in the case's golden file, and the exit code is 0.
func TestLintWarnings(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join(repoRoot, "testdata", "bundles", "warn", "*"))
	if err != nil || len(cases) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, dir := range cases {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			stdout, stderr, code := runCLI(t, lintArgs(dir)...)
			if code != 0 || stderr != "" {
				t.Errorf("exit code %d, stderr %q; want 0 and nothing", code, stderr)
			}
			if !strings.Contains(stdout, ": warning: ") || !strings.HasSuffix(stdout, " warning(s), no errors\n") {
				t.Errorf("no warning in:\n%s", stdout)
			}
			golden(t, filepath.Join(dir, "expected"), []byte(strings.ReplaceAll(stdout, dir+string(filepath.Separator), "")))
		})
	}
}
