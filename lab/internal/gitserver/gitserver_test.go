package gitserver_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/peerlink/peerlink/lab/internal/gitserver"
	"github.com/peerlink/peerlink/testkit/testenv"
)

// newServer starts a Server on 127.0.0.1 for the test and returns it with
// its address.
func newServer(t *testing.T) (*gitserver.Server, string) {
	t.Helper()
	var stderr bytes.Buffer
	s, err := gitserver.New(filepath.Join(t.TempDir(), "repos"), &stderr)
	if errors.Is(err, exec.ErrNotFound) {
		if os.Getenv(testenv.RequireEnv) == "1" {
			t.Fatalf("git is required: %v", err)
		}
		t.Skipf("git is not installed (hack/install-deps.sh installs it): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
		if stderr.Len() > 0 {
			t.Logf("git http-backend said:\n%s", stderr.String())
		}
	})
	return s, ln.Addr().String()
}

// git runs the git CLI in dir as an administrator with no configuration of
// their own would, and returns its standard output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=Admin", "GIT_AUTHOR_EMAIL=admin@example.org",
		"GIT_COMMITTER_NAME=Admin", "GIT_COMMITTER_EMAIL=admin@example.org",
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

func TestPushThenCloneSeesTheCommit(t *testing.T) {
	s, addr := newServer(t)
	ctx := context.Background()
	if err := s.CreateRepository(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	url := gitserver.RepositoryURL(addr, "alice")
	work := t.TempDir()

	// The administrator clones the empty repository, commits a manifest
	// and a blob larger than git's post buffer (1 MiB), so that the push
	// streams a chunked request body through the CGI, and pushes.
	first := filepath.Join(work, "first")
	git(t, work, "clone", "--quiet", url, first)
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello\n"
	if err := os.WriteFile(filepath.Join(first, "hello.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	blob := make([]byte, 3<<20)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(first, "blob"), blob, 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, first, "add", ".")
	git(t, first, "commit", "--quiet", "-m", "hello")
	pushed := git(t, first, "rev-parse", "HEAD")
	git(t, first, "push", "--quiet", "origin", "HEAD:"+gitserver.DefaultBranch)

	// A fresh clone sees the commit on the default branch.
	second := filepath.Join(work, "second")
	git(t, work, "clone", "--quiet", url, second)
	if got := git(t, second, "rev-parse", "HEAD"); got != pushed {
		t.Fatalf("clone is at %s, pushed %s", got, pushed)
	}
	got, err := os.ReadFile(filepath.Join(second, "hello.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != manifest {
		t.Fatalf("cloned hello.yaml = %q, pushed %q", got, manifest)
	}
	if got, err := os.ReadFile(filepath.Join(second, "blob")); err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("cloned blob differs from the pushed one (err %v)", err)
	}

	// A second push reaches the first clone by fetch.
	if err := os.WriteFile(filepath.Join(second, "hello.yaml"), []byte(manifest+"data:\n  a: b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, second, "commit", "--quiet", "-am", "data")
	next := git(t, second, "rev-parse", "HEAD")
	git(t, second, "push", "--quiet")
	git(t, first, "fetch", "--quiet", "origin")
	if got := git(t, first, "rev-parse", "origin/"+gitserver.DefaultBranch); got != next {
		t.Fatalf("fetch found %s, pushed %s", got, next)
	}
}

func TestCreateRepositoryIsIdempotent(t *testing.T) {
	s, addr := newServer(t)
	ctx := context.Background()
	for range 2 {
		if err := s.CreateRepository(ctx, "bob"); err != nil {
			t.Fatal(err)
		}
	}
	git(t, t.TempDir(), "ls-remote", gitserver.RepositoryURL(addr, "bob"))
}

func TestCreateRepositoryRefusesUnsafeNames(t *testing.T) {
	s, _ := newServer(t)
	for _, name := range []string{"", "../x", "a/b", ".hidden", "Alice", "a..b", strings.Repeat("a", 64)} {
		err := s.CreateRepository(context.Background(), name)
		if !errors.Is(err, gitserver.ErrInvalidName) {
			t.Errorf("CreateRepository(%q) = %v, want ErrInvalidName", name, err)
		}
	}
}

func TestUnknownPathsAreNotFound(t *testing.T) {
	s, addr := newServer(t)
	if err := s.CreateRepository(context.Background(), "carol"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"/dave.git/info/refs?service=git-upload-pack", // no such repository
		"/carol/info/refs?service=git-upload-pack",    // not a .git path
		"/carol.git/../carol.git/info/refs?service=git-upload-pack",
		"/",
	} {
		resp, err := http.Get("http://" + addr + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", p, resp.Status)
		}
	}
	resp, err := http.Get("http://" + addr + "/carol.git/info/refs?service=git-upload-pack")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-git-upload-pack-advertisement" {
		t.Errorf("GET info/refs of carol: %s %q, want 200 with the upload-pack advertisement", resp.Status, resp.Header.Get("Content-Type"))
	}
}
