package labctl

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/peerlink/peerlink/testkit/testenv"
)

// TestPreviousRelease reads the commit the repository names, skipping
// comments, and lets the environment override it; a file that names none
// is refused, naming the file.
func TestPreviousRelease(t *testing.T) {
	t.Setenv(PreviousReleaseEnv, "")
	repo := t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, "hack"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(repo, PreviousReleaseFile), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("# why this commit\n\n  abc1234  \nlater\n")
	if got, err := PreviousRelease(repo); err != nil || got != "abc1234" {
		t.Errorf("PreviousRelease = %q, %v; want abc1234", got, err)
	}
	t.Setenv(PreviousReleaseEnv, "def5678")
	if got, err := PreviousRelease(repo); err != nil || got != "def5678" {
		t.Errorf("PreviousRelease with %s set = %q, %v; want def5678", PreviousReleaseEnv, got, err)
	}
	t.Setenv(PreviousReleaseEnv, "")
	write("# nothing but comments\n")
	if _, err := PreviousRelease(repo); err == nil || !strings.Contains(err.Error(), PreviousReleaseFile) {
		t.Errorf("PreviousRelease of a file naming no commit: %v, want an error naming %s", err, PreviousReleaseFile)
	}
}

// TestExtractRelease writes the files of the commit the repository names
// as its previous release, as that commit holds them, and names the
// release after its short hash; a commit that does not exist is refused.
func TestExtractRelease(t *testing.T) {
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	commit, err := PreviousRelease(repo)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r, err := ExtractRelease(t.Context(), repo, commit, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.Commit, commit) || len(r.Commit) != 40 || r.Version != r.Commit[:7] || r.Tree != dir {
		t.Errorf("release %+v, want the full hash of %s, its first 7 digits as the version, in %s", r, commit, dir)
	}
	const file = "bundles/install/kustomization.yaml"
	want, err := exec.Command("git", "-C", repo, "show", r.Commit+":"+file).Output()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s of the extracted release differs from the commit's", file)
	}
	if _, err := ExtractRelease(t.Context(), repo, "0000000000000000000000000000000000000000", t.TempDir()); err == nil {
		t.Error("ExtractRelease of a commit that does not exist: no error")
	}
}
