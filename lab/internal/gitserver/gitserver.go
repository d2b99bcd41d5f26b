package gitserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// DefaultBranch is the branch HEAD of every new repository points at, so
// that a clone checks it out once something is pushed to it.
const DefaultBranch = "main"

// ErrInvalidName is returned for a repository name that is not a short
// lowercase DNS-label-like word (letters, digits, '.', '_', '-').
var ErrInvalidName = errors.New("invalid repository name")

// validName accepts names safe as one path segment and one directory name.
var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// Server serves the bare repositories <Dir>/<name>.git at
// http://<address>/<name>.git. It is an http.Handler.
type Server struct {
	dir     string
	git     string
	backend *cgi.Handler
}

// New returns a Server for the repositories in dir, which it creates if
// needed. It fails, with an error matching exec.ErrNotFound, when git is not
// installed. What git http-backend and the handler report goes to stderr
// (os.Stderr if nil).
func New(dir string, stderr io.Writer) (*Server, error) {
	if stderr == nil {
		stderr = os.Stderr
	}
	git, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("gitserver: %w", err)
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("gitserver: repository directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("gitserver: repository directory: %w", err)
	}
	return &Server{
		dir: dir,
		git: git,
		backend: &cgi.Handler{
			Path: git,
			Args: []string{"http-backend"},
			Dir:  dir,
			Env: []string{
				"GIT_PROJECT_ROOT=" + dir,
				// Every repository in dir is served; no
				// git-daemon-export-ok file is needed.
				"GIT_HTTP_EXPORT_ALL=1",
				// Only the repositories' own configuration applies, not
				// that of whoever runs the server.
				"GIT_CONFIG_NOSYSTEM=1",
				"GIT_CONFIG_GLOBAL=" + os.DevNull,
			},
			Logger: log.New(stderr, "gitserver: ", log.LstdFlags),
			Stderr: stderr,
		},
	}, nil
}

// Dir returns the directory holding the repositories.
func (s *Server) Dir() string { return s.dir }

// RepositoryDir returns the directory of the bare repository name.
func (s *Server) RepositoryDir(name string) string {
	return filepath.Join(s.dir, name+".git")
}

// CreateRepository creates the empty bare repository name, open to push,
// with HEAD on DefaultBranch. A repository that exists is left as it is.
func (s *Server) CreateRepository(ctx context.Context, name string) error {
	if !validName.MatchString(name) || strings.Contains(name, "..") {
		return fmt.Errorf("gitserver: repository %q: %w", name, ErrInvalidName)
	}
	repo := s.RepositoryDir(name)
	if _, err := os.Stat(filepath.Join(repo, "HEAD")); err == nil {
		return nil
	}
	if err := s.run(ctx, "init", "--quiet", "--bare", "--initial-branch="+DefaultBranch, repo); err != nil {
		return fmt.Errorf("gitserver: creating repository %s: %w", name, err)
	}
	// Without an authenticated user, git http-backend refuses pushes unless
	// the repository allows them.
	if err := s.run(ctx, "-C", repo, "config", "http.receivepack", "true"); err != nil {
		return fmt.Errorf("gitserver: opening repository %s to push: %w", name, err)
	}
	return nil
}

func (s *Server) run(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, s.git, args...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ServeHTTP answers Git's smart HTTP requests for the repositories in Dir
// and 404 for anything else.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name, ok := repositoryOf(r.URL.Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if _, err := os.Stat(filepath.Join(s.RepositoryDir(name), "HEAD")); err != nil {
		http.NotFound(w, r)
		return
	}
	if len(r.TransferEncoding) > 0 {
		// git sends a body larger than its http.postBuffer (a push of
		// more than 1 MiB) chunked, which CGI cannot pass on: the
		// program is told the length of the body up front.
		body, err := spool(r.Body)
		if err != nil {
			s.backend.Logger.Printf("%s %s: reading the request body: %v", r.Method, r.URL.Path, err)
			http.Error(w, "cannot read the request body", http.StatusBadRequest)
			return
		}
		defer body.Close()
		info, err := body.Stat()
		if err != nil {
			s.backend.Logger.Printf("%s %s: %v", r.Method, r.URL.Path, err)
			http.Error(w, "cannot read the request body", http.StatusInternalServerError)
			return
		}
		r = r.Clone(r.Context())
		r.Body, r.ContentLength, r.TransferEncoding = body, info.Size(), nil
	}
	s.backend.ServeHTTP(w, r)
}

// spool copies body into an unlinked temporary file and returns that file,
// positioned at its start.
func spool(body io.Reader) (*os.File, error) {
	f, err := os.CreateTemp("", "gitserver-body-")
	if err != nil {
		return nil, fmt.Errorf("spooling the request body: %w", err)
	}
	// Unlinked at once: the open file is all that needs it.
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("spooling the request body: %w", err)
	}
	if _, err := io.Copy(f, body); err != nil {
		f.Close()
		return nil, fmt.Errorf("spooling the request body: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("spooling the request body: %w", err)
	}
	return f, nil
}

// repositoryOf returns the repository name of a request path
// /<name>.git/..., refusing paths that are not clean.
func repositoryOf(p string) (string, bool) {
	if clean := path.Clean(p); p == "" || (clean != p && clean+"/" != p) {
		return "", false
	}
	first, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	name, ok := strings.CutSuffix(first, ".git")
	if !ok || !validName.MatchString(name) || strings.Contains(name, "..") {
		return "", false
	}
	return name, true
}

// RepositoryURL returns the URL of repository name on a server listening on
// addr (host:port).
func RepositoryURL(addr, name string) string {
	return "http://" + addr + "/" + name + ".git"
}

// Serve serves on ln until ctx is done, then stops taking requests, lets
// the running ones end for a few seconds, and returns nil. It returns the
// error that stops it otherwise.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// No write or read timeout: a push or clone of a large repository takes
	// as long as it takes.
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("gitserver: serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(stop); err != nil {
		hs.Close()
		return fmt.Errorf("gitserver: stopping on %s: %w", ln.Addr(), err)
	}
	return nil
}

// ListenAndServe listens on addr (host:port) and serves until ctx is done;
// see Serve.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("gitserver: %w", err)
	}
	return s.Serve(ctx, ln)
}
