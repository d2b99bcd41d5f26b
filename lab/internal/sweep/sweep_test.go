package sweep

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/peerlink/peerlink/internal/testenv/proc"
)

func TestUnescapeMountPath(t *testing.T) {
	for in, want := range map[string]string{
		"/var/lib/peerlink-lab/c1/kubelet": "/var/lib/peerlink-lab/c1/kubelet",
		`/tmp/with\040space/x`:             "/tmp/with space/x",
		`/tmp/tab\011and\134backslash`:     "/tmp/tab\tand\\backslash",
		`/tmp/not\9an\escape`:              `/tmp/not\9an\escape`,
	} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestProcessesOfTheDir starts processes that use a lab directory in the
// ways the lab's own do (working directory, a path argument, a flag with a
// path) and one that does not, and checks which Processes lists.
func TestProcessesOfTheDir(t *testing.T) {
	dir := t.TempDir()
	l := Lab{Dir: dir}
	start := func(cwd string, args ...string) int {
		t.Helper()
		cmd := exec.Command("sleep", args...)
		cmd.Dir = cwd
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd.Process.Pid
	}
	other := t.TempDir()
	byCwd := start(dir, "30")
	// sh -c takes the arguments after the script as its $0 and $1: they
	// only need to be on the command line.
	byArg := exec.Command("sh", "-c", "sleep 30", "sh", filepath.Join(dir, "c1", "kubeconfig"))
	if err := byArg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = byArg.Process.Kill(); _ = byArg.Wait() })
	byFlag := exec.Command("sh", "-c", "sleep 30", "sh", "--config="+filepath.Join(dir, "x.toml"))
	if err := byFlag.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = byFlag.Process.Kill(); _ = byFlag.Wait() })
	unrelated := start(other, "30")

	procs, err := l.Processes()
	if err != nil {
		t.Fatal(err)
	}
	found := map[int]string{}
	for _, p := range procs {
		found[p.Pid] = p.Reason
	}
	for name, pid := range map[string]int{"working directory": byCwd, "argument": byArg.Process.Pid, "flag": byFlag.Process.Pid} {
		if found[pid] == "" {
			t.Errorf("the process using the lab directory by %s (%d) is not listed: %v", name, pid, procs)
		}
	}
	if r, ok := found[unrelated]; ok {
		t.Errorf("an unrelated process is listed: %s", r)
	}
	if !strings.HasPrefix(found[byCwd], "cwd ") {
		t.Errorf("reason for the working directory: %q", found[byCwd])
	}

	pids := []int{byCwd, byArg.Process.Pid, byFlag.Process.Pid}
	if err := proc.Kill(pids, time.Second); err != nil {
		t.Fatal(err)
	}
	left, err := l.Processes()
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("after Kill: %v", left)
	}
}
