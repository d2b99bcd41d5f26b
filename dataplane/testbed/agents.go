package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/peerlink/peerlink/dataplane/nstest"
)

// BuildAgent builds peerlink-agent into dir and returns its path.
func BuildAgent(ctx context.Context, dir string) (string, error) {
	return build(ctx, dir, "github.com/peerlink/peerlink/cmd/peerlink-agent")
}

// BuildWGBare builds the bare wireguard-go runner (package wgbare) into dir
// and returns its path.
func BuildWGBare(ctx context.Context, dir string) (string, error) {
	return build(ctx, dir, "github.com/peerlink/peerlink/dataplane/testbed/wgbare")
}

// build builds the command pkg into dir, as the images are built.
func build(ctx context.Context, dir, pkg string) (string, error) {
	bin := filepath.Join(dir, filepath.Base(pkg))
	gobin := os.Getenv("GO")
	if gobin == "" {
		gobin = "go"
	}
	cmd := exec.CommandContext(ctx, gobin, "build", "-trimpath", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// Process is an agent running in a network namespace.
type Process struct {
	// Log is the file of its standard output and error.
	Log  string
	cmd  *exec.Cmd
	done chan error
	// ns, bin and args start it again.
	ns   *nstest.NS
	bin  string
	args []string
}

// Start runs bin with args in ns, its output appended to logPath.
func Start(ns *nstest.NS, logPath, bin string, args ...string) (*Process, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// A pod has a /run/wireguard of its own; so does each agent here.
	cmd := ns.CommandWithOwnRun(context.Background(), bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s in %s: %w", filepath.Base(bin), ns.Name, err)
	}
	p := &Process{Log: logPath, cmd: cmd, done: make(chan error, 1), ns: ns, bin: bin, args: args}
	go func() {
		// `ip netns exec` and sh exec the agent: the process waited for is
		// the agent itself, and SIGKILL reaches it.
		p.done <- cmd.Wait()
		log.Close()
	}()
	return p, nil
}

// Again starts the program of p again, in the same namespace with the same
// log, with extra arguments after the first ones. p must have ended.
func (p *Process) Again(extra ...string) (*Process, error) {
	return Start(p.ns, p.Log, p.bin, append(slices.Clone(p.args), extra...)...)
}

// Kill sends SIGKILL and waits for the process to end.
func (p *Process) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.done <- errors.New("killed")
}

// Stop sends SIGTERM and waits up to timeout for the process to end, then
// kills it. It returns the process's exit error, if any.
func (p *Process) Stop(timeout time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("did not stop within %v of SIGTERM", timeout)
	}
}

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case err := <-p.done:
		p.done <- err
		return true, err
	default:
		return false, nil
	}
}

// Tail returns the last n lines of the process's log.
func (p *Process) Tail(n int) string {
	data, err := os.ReadFile(p.Log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
