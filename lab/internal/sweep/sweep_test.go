package sweep

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/peerlink/peerlink/testkit/testenv/proc"
)

// Find takes the recorded clusters and the cluster directories it finds,
// and nothing else of the directory.
func TestFind(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"c3", "c12", "cx", "c07", "registry"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "c5"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l := Find(dir, []int{3, 1})
	if want := []int{1, 3, 12}; l.Dir != dir || !slices.Equal(l.Indices, want) {
		t.Errorf("Find = %+v, want indices %v", l, want)
	}
}

// drain removes until nothing is listed, including what a removal brings to
// light, and reports what a bounded number of rounds leaves.
func TestDrain(t *testing.T) {
	// Each removal uncovers one item fewer: 3, then 2, then 1, then none.
	layers := 3
	list := func() ([]int, error) { return make([]int, layers), nil }
	removed := 0
	remove := func(items []int) error {
		removed += len(items)
		layers--
		return nil
	}
	if left, err := drain(5, list, remove); err != nil || len(left) != 0 || removed != 6 {
		t.Errorf("drain: left %v, %v, removed %d, want nothing left after removing 6", left, err, removed)
	}
	layers = 10
	if left, err := drain(2, list, remove); err != nil || len(left) != 8 {
		t.Errorf("drain of two rounds: left %d (%v), want 8", len(left), err)
	}
	failed := errors.New("busy")
	if _, err := drain(2, list, func([]int) error { return failed }); !errors.Is(err, failed) {
		t.Errorf("drain with a failing removal: %v", err)
	}
}

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
