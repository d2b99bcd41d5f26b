package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRepoRoot(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "hack", "testbin.sh")); err != nil {
		t.Errorf("repository root %s has no hack/testbin.sh: %v", root, err)
	}
	if _, err := repoRoot(filepath.Join(root, "hack", "kube", "etcd")); err != nil {
		t.Errorf("repoRoot from a nested module: %v", err)
	}
	if _, err := repoRoot(t.TempDir()); err == nil {
		t.Errorf("repoRoot outside the repository found one")
	}
}

func TestModulePath(t *testing.T) {
	for in, want := range map[string]string{
		"module example.com/a\n\ngo 1.26\n":     "example.com/a",
		"// c\nmodule \"example.com/b\" // x\n": "example.com/b",
		"go 1.26\n":                             "",
	} {
		if got := modulePath([]byte(in)); got != want {
			t.Errorf("modulePath(%q) = %q, want %q", in, got, want)
		}
	}
}
