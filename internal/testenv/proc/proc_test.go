package proc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/peerlink/peerlink/internal/testenv"
	"github.com/peerlink/peerlink/internal/testenv/netns"
)

// waitLog waits until the log of p holds want.
func waitLog(t *testing.T, p *Process, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(Tail(p.Log, 100), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %q in its log:\n%s", p.Name, want, Tail(p.Log, 100))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A process started with a pid file is found by it, stops on SIGTERM with
// its exit status, and starts again with more arguments, its output
// appended to the same log.
func TestStartStopAgain(t *testing.T) {
	dir := t.TempDir()
	script := `echo "started $*"; trap 'echo terminated; exit 3' TERM; while :; do sleep 0.05; done`
	p, err := Start(Spec{
		Name:    "looper",
		Argv:    []string{"sh", "-c", script, "sh", "first"},
		Log:     filepath.Join(dir, "logs", "looper.log"),
		PidFile: filepath.Join(dir, "looper.pid"),
	})
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, p, "started first")
	if pid, err := ReadPidFile(p.PidFile); err != nil || pid != p.Pid {
		t.Errorf("pid file: %d (%v), want %d", pid, err, p.Pid)
	}
	if !Running(p.Pid) {
		t.Errorf("Running(%d) is false while the process runs", p.Pid)
	}
	var exitErr *exec.ExitError
	if err := p.Stop(5 * time.Second); !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
		t.Errorf("Stop: %v, want exit status 3", err)
	}
	if Running(p.Pid) {
		t.Errorf("Running(%d) after Stop", p.Pid)
	}
	if f := p.Failure().Error(); !strings.Contains(f, "looper exited (exit status 3)") || !strings.Contains(f, "terminated") {
		t.Errorf("Failure: %s", f)
	}

	q, err := p.Again("second")
	if err != nil {
		t.Fatal(err)
	}
	if want := append(slices.Clone(p.Argv), "second"); !slices.Equal(q.Argv, want) {
		t.Errorf("Again: argv %q, want %q", q.Argv, want)
	}
	waitLog(t, q, "started first second")
	q.Kill()
	select {
	case <-q.Exited:
	default:
		t.Error("Exited is open after Kill")
	}
	if log := Tail(p.Log, 10); strings.Count(log, "started") != 2 {
		t.Errorf("log of both runs:\n%s", log)
	}
}

// A process that ignores SIGTERM is killed once the grace period is over,
// and Stop says so.
func TestStopKillsAfterGrace(t *testing.T) {
	p, err := Start(Spec{
		Name: "stubborn",
		Argv: []string{"sh", "-c", `trap '' TERM; echo ready; while :; do sleep 0.05; done`},
		Log:  filepath.Join(t.TempDir(), "stubborn.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, p, "ready")
	err = p.Stop(200 * time.Millisecond)
	var exitErr *exec.ExitError
	if err == nil || !strings.Contains(err.Error(), "did not stop within 200ms") || !errors.As(err, &exitErr) {
		t.Errorf("Stop: %v, want a kill after 200ms", err)
	}
}

// A detached process leads a session of its own; one that is not stays in
// the caller's.
func TestDetach(t *testing.T) {
	self, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, detach := range []bool{false, true} {
		p, err := Start(Spec{Name: "sleep", Argv: []string{"sleep", "30"}, Log: filepath.Join(t.TempDir(), "sleep.log"), Detach: detach})
		if err != nil {
			t.Fatal(err)
		}
		sid, err := unix.Getsid(p.Pid)
		p.Kill()
		if err != nil {
			t.Fatal(err)
		}
		if leads := sid == p.Pid; leads != detach || (!detach && sid != self) {
			t.Errorf("Detach %v: session %d, process %d, caller's session %d", detach, sid, p.Pid, self)
		}
	}
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("a\nb\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]string{1: "c", 2: "b\nc", 5: "a\nb\nc"} {
		if got := Tail(path, n); got != want {
			t.Errorf("Tail(%d) = %q, want %q", n, got, want)
		}
	}
	if got := Tail(path+".missing", 3); !strings.HasPrefix(got, "(") {
		t.Errorf("Tail of a missing file = %q, want a note in parentheses", got)
	}
}

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

// A program started in a namespace runs there, in the caller's mounts, or
// in mounts of its own as a pod.
func TestNetns(t *testing.T) {
	netns.RequirePrivileged(t)
	ns := netns.New(t, "proc")
	want, err := netns.Inode(netns.Path(ns.Name))
	if err != nil {
		t.Fatal(err)
	}
	hostMnt, err := netns.Inode("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range []bool{false, true} {
		p, err := Start(Spec{Name: "sleep", Argv: []string{"sleep", "30"}, Netns: ns.Name, Pod: pod, Log: filepath.Join(t.TempDir(), "sleep.log")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill)
		// The pid is the program's once nsenter or the shell has exec'd it.
		deadline := time.Now().Add(10 * time.Second)
		for {
			exe, _ := os.Readlink("/proc/" + strconv.Itoa(p.Pid) + "/exe")
			if filepath.Base(exe) == "sleep" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod %v: process %d runs %s, not sleep", pod, p.Pid, exe)
			}
			time.Sleep(20 * time.Millisecond)
		}
		got, err := netns.Inode("/proc/" + strconv.Itoa(p.Pid) + "/ns/net")
		if err != nil || got != want {
			t.Errorf("pod %v: network namespace %d (%v), want %d", pod, got, err, want)
		}
		mnt, err := netns.Inode("/proc/" + strconv.Itoa(p.Pid) + "/ns/mnt")
		if err != nil || (mnt == hostMnt) == pod {
			t.Errorf("pod %v: mount namespace %d (%v), the host's is %d", pod, mnt, err, hostMnt)
		}
	}
}
