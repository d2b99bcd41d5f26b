package proc

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// Spec describes a program to start.
type Spec struct {
	// Name labels the process in errors.
	Name string
	// Argv is the program and its arguments.
	Argv []string
	// Netns names the network namespace to run in; empty runs in the
	// caller's.
	Netns string
	// Pod runs the program in Netns as a pod's container runs, with mounts
	// of its own (netns.AsPod). Otherwise it shares the caller's mounts
	// (netns.Enter), as the lab's kubelet and containerd must: the host
	// sees the volumes they mount, and the lab removes them.
	Pod bool
	// Log receives stdout and stderr, appended.
	Log string
	// PidFile, unless empty, receives the process id.
	PidFile string
	// Detach makes the process outlive the caller: it leads a session of
	// its own, so that the signals of the caller's terminal do not reach
	// it. A process that is not detached ends with a test interrupted.
	Detach bool
}

// Process is a started program.
type Process struct {
	Spec
	Pid int
	// Exited is closed when the process ends while the caller still runs.
	Exited <-chan struct{}
	cmd    *exec.Cmd
	// err is how it ended, once Exited is closed.
	err error
}

// Start starts s. nsenter, `ip netns exec` and the shell of netns.AsPod all
// exec, so the process is the program itself: its pid is the one written,
// and signals reach it.
func Start(s Spec) (*Process, error) {
	argv := s.Argv
	switch {
	case s.Netns != "" && s.Pod:
		argv = netns.AsPod(s.Netns, argv...)
	case s.Netns != "":
		argv = netns.Enter(s.Netns, argv...)
	}
	if err := os.MkdirAll(filepath.Dir(s.Log), 0o755); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	logf, err := os.OpenFile(s.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Env = env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: s.Detach}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	if s.PidFile != "" {
		if err := os.WriteFile(s.PidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, fmt.Errorf("start %s: %w", s.Name, err)
		}
	}
	exited := make(chan struct{})
	p := &Process{Spec: s, Pid: cmd.Process.Pid, Exited: exited, cmd: cmd}
	go func() {
		// Waiting reaps the process if it ends while the caller runs.
		p.err = cmd.Wait()
		close(exited)
	}()
	return p, nil
}

// Again starts the program of p again, as p was started, with extra
// arguments after the first ones. p must have ended.
func (p *Process) Again(extra ...string) (*Process, error) {
	s := p.Spec
	s.Argv = append(slices.Clone(s.Argv), extra...)
	return Start(s)
}

// Kill sends SIGKILL and waits for the process to end.
func (p *Process) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.Exited
}

// Stop sends SIGTERM and waits up to grace for the process to end, then
// kills it. It returns how the process ended (an *exec.ExitError unless it
// exited with status 0), wrapped in an error that says so when it had to
// be killed.
func (p *Process) Stop(grace time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Exited:
		return p.err
	case <-time.After(grace):
		p.Kill()
		return fmt.Errorf("%s did not stop within %v of SIGTERM: %w", p.Name, grace, p.err)
	}
}

// Failure describes why an exited process ended, with the end of its log.
// It must only be called once Exited is closed.
func (p *Process) Failure() error {
	return fmt.Errorf("%s exited (%v); end of %s:\n%s", p.Name, p.cmd.ProcessState, p.Log, Tail(p.Log, 15))
}

// env is the environment of the programs: the caller's, with the sbin
// directories on PATH, where Debian puts runc, iptables and conntrack.
func env() []string {
	path := os.Getenv("PATH")
	for _, dir := range []string{"/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/local/bin", "/usr/bin", "/bin"} {
		if !strings.Contains(":"+path+":", ":"+dir+":") {
			path += ":" + dir
		}
	}
	return append(os.Environ(), "PATH="+strings.TrimPrefix(path, ":"))
}

// Tail returns the last n lines of a file, or a note why it cannot.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Build compiles the commands pkgs, paths relative to the module root repo
// (./cmd/peerlink-agent), into the directory out, each named after the last
// element of its path: static and with -trimpath, as the images are built,
// for this machine, with the go command in $GO, else go.
func Build(ctx context.Context, repo, out string, pkgs ...string) error {
	args := append([]string{"build", "-trimpath", "-o", out + string(filepath.Separator)}, pkgs...)
	cmd := exec.CommandContext(ctx, cmp.Or(os.Getenv("GO"), "go"), args...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}
