package proc

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	// How the process ended is an *exec.ExitError.
	var exit interface{ ExitCode() int }
	if err := p.Stop(5 * time.Second); !errors.As(err, &exit) || exit.ExitCode() != 3 {
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
	if got, want := strings.Join(q.Argv, " "), strings.Join(p.Argv, " ")+" second"; got != want {
		t.Errorf("Again: argv %q, want %q", got, want)
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
	var killed interface{ ExitCode() int }
	if err == nil || !strings.Contains(err.Error(), "did not stop within 200ms") || !errors.As(err, &killed) || killed.ExitCode() != -1 {
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
