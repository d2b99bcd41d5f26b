package proc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/peerlink/peerlink/testkit/testenv"
)

// Build names each binary after its package and builds it statically.
func TestBuild(t *testing.T) {
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := Build(t.Context(), repo, out, "./lab/pause"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "pause"))
	if err != nil {
		t.Fatal(err)
	}
	// A dynamically linked ELF names its interpreter.
	if strings.Contains(string(b), "ld-linux") {
		t.Error("the binary is dynamically linked")
	}
	if err := Build(t.Context(), repo, out, "./no/such/package"); err == nil {
		t.Error("Build of a missing package succeeded")
	}
}
