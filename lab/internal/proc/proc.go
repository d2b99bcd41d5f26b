package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Spec describes a process to start in the background.
type Spec struct {
	// Name labels the process in errors.
	Name string
	// Argv is the program and its arguments.
	Argv []string
	// Netns is the path of a network namespace to run in (see netns.Path);
	// empty runs in the caller's namespace.
	Netns string
	// Log receives stdout and stderr (appended).
	Log string
	// PidFile receives the process id.
	PidFile string
}

// Process is a started process. It keeps running when the caller exits: it
// leads its own session and its output goes to its log file.
type Process struct {
	Spec
	Pid int
	// Exited is closed when the process ends while the caller still runs.
	Exited <-chan struct{}
	state  *os.ProcessState
}

// Start starts s. nsenter enters the namespace and then executes the program
// itself, so the pid written is the program's.
func Start(s Spec) (*Process, error) {
	argv := s.Argv
	if s.Netns != "" {
		argv = append([]string{"nsenter", "--net=" + s.Netns, "--"}, argv...)
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
	cmd.Env = Env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	if err := os.WriteFile(s.PidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	exited := make(chan struct{})
	p := &Process{Spec: s, Pid: cmd.Process.Pid, Exited: exited}
	go func() {
		// Waiting reaps the process if it dies while the lab command runs.
		_ = cmd.Wait()
		p.state = cmd.ProcessState
		close(exited)
	}()
	return p, nil
}

// Failure describes why an exited process ended, with the end of its log.
// It must only be called once Exited is closed.
func (p *Process) Failure() error {
	return fmt.Errorf("%s exited (%v); end of %s:\n%s", p.Name, p.state, p.Log, Tail(p.Log, 15))
}

// Env is the environment of the lab's processes: the caller's, with the sbin
// directories on PATH, where Debian puts runc, iptables and conntrack.
func Env() []string {
	env := os.Environ()
	path := os.Getenv("PATH")
	for _, dir := range []string{"/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/local/bin", "/usr/bin", "/bin"} {
		if !strings.Contains(":"+path+":", ":"+dir+":") {
			path += ":" + dir
		}
	}
	return append(env, "PATH="+strings.TrimPrefix(path, ":"))
}

// Tail returns the last n lines of a file, or a note why it cannot.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

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

// Kill sends SIGTERM to every pid, waits up to grace for them to end, then
// sends SIGKILL to those left and waits for them to disappear.
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
