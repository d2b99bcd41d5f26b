package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ReadPidFile returns the pid recorded in path.
func ReadPidFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s: bad content %q", path, strings.TrimSpace(string(b)))
	}
	return pid, nil
}

// Running reports whether pid is a live process (zombies count as gone).
func Running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may contain
	// spaces and parentheses itself.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	return s[i+2] != 'Z'
}

// Pids lists the processes of this machine, as /proc shows them.
func Pids() ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Kill sends SIGTERM to every pid, waits up to grace for them to end, then
// sends SIGKILL to those left and waits for them to disappear. It serves
// processes known by pid alone, such as a lab's started by an earlier
// command; a Process is stopped with its Stop.
func Kill(pids []int, grace time.Duration) error {
	signalAll(pids, syscall.SIGTERM)
	if waitGone(pids, grace) {
		return nil
	}
	signalAll(pids, syscall.SIGKILL)
	if waitGone(pids, 5*time.Second) {
		return nil
	}
	var left []string
	for _, pid := range pids {
		if Running(pid) {
			left = append(left, strconv.Itoa(pid))
		}
	}
	return fmt.Errorf("processes %s still running after SIGKILL", strings.Join(left, ", "))
}

func signalAll(pids []int, sig syscall.Signal) {
	for _, pid := range pids {
		// ESRCH means the process is already gone, which is the goal; any
		// other failure shows up when waitGone finds it still running.
		_ = syscall.Kill(pid, sig)
	}
}

func waitGone(pids []int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		alive := false
		for _, pid := range pids {
			if Running(pid) {
				alive = true
				break
			}
		}
		if !alive {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
