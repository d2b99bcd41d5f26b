package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
	"github.com/peerlink/peerlink/testkit/testenv/proc"
)

// Shim sockets live in containerd's compiled-in state directory, whatever
// the configured one: the lab removes those its shims left behind.
const shimSocketDir = "/run/containerd/s"

// Host paths the CNI plugins and the kubelet write to outside the
// directories the lab configures.
const (
	cniResultsDir    = "/var/lib/cni/results"
	cniNetworksDir   = "/var/lib/cni/networks"
	containerLogsDir = "/var/log/containers"
)

// Lab names what one lab made: its directory and its cluster indices.
type Lab struct {
	Dir     string
	Indices []int
}

// Find names what to remove for the lab in dir: the clusters of its record
// (indices), plus any cluster directory found in dir, since a record can be
// missing when the directory was copied or the record damaged.
func Find(dir string, recorded []int) Lab {
	l := Lab{Dir: dir, Indices: slices.Clone(recorded)}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		// Cluster directories are named after the namespaces.
		digits, ok := strings.CutPrefix(e.Name(), "c")
		if i, err := strconv.Atoi(digits); ok && err == nil && e.IsDir() && cluster.Namespace(i) == e.Name() {
			l.Indices = append(l.Indices, i)
		}
	}
	slices.Sort(l.Indices)
	l.Indices = slices.Compact(l.Indices)
	return l
}

// HostDirs are the directories outside the lab directory that containerd,
// the CNI plugins and the kubelet create when missing, children before
// parents. iproute2's /var/run/netns is not one: it is a mount point shared
// with every user of named network namespaces on the host.
func HostDirs() []string {
	return []string{shimSocketDir, filepath.Dir(shimSocketDir), cniResultsDir, cniNetworksDir,
		filepath.Dir(cniResultsDir), containerLogsDir}
}

// Process is a process that belongs to the lab, with why it does.
type Process struct {
	Pid    int
	Reason string
}

// Processes lists the processes of the lab: those in a cluster's network
// namespace or cgroup (pods, including their containers in their own
// namespaces), those whose executable, working directory or arguments lie in
// the lab directory, and those named by its pid files. The caller and its
// ancestors are never listed.
func (l Lab) Processes() ([]Process, error) {
	spared := map[int]bool{}
	for pid := os.Getpid(); pid > 1; pid = parent(pid) {
		spared[pid] = true
	}
	namespaces := map[uint64]string{}
	for _, i := range l.Indices {
		for _, ns := range cluster.Namespaces(i) {
			if ino, err := netns.Inode(netns.Path(ns)); err == nil {
				namespaces[ino] = ns
			}
		}
	}
	found := map[int]string{}
	add := func(pid int, reason string) {
		if !spared[pid] && found[pid] == "" {
			found[pid] = reason
		}
	}
	pidFiles, err := filepath.Glob(filepath.Join(l.Dir, "*", "run", "*.pid"))
	if err != nil {
		return nil, err
	}
	pidFiles = append(pidFiles, filepath.Join(l.Dir, "registry.pid"))
	for _, f := range pidFiles {
		if pid, err := proc.ReadPidFile(f); err == nil && proc.Running(pid) {
			add(pid, "pid file "+f)
		}
	}
	pids, err := proc.Pids()
	if err != nil {
		return nil, err
	}
	for _, pid := range pids {
		if spared[pid] || !proc.Running(pid) {
			continue
		}
		if reason := l.owns(pid, namespaces); reason != "" {
			add(pid, reason)
		}
	}
	out := make([]Process, 0, len(found))
	for pid, reason := range found {
		out = append(out, Process{Pid: pid, Reason: reason})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pid < out[j].Pid })
	return out, nil
}

// owns says why pid belongs to the lab, or "" when it does not. Processes
// that end while being inspected simply do not match.
func (l Lab) owns(pid int, namespaces map[uint64]string) string {
	base := fmt.Sprintf("/proc/%d", pid)
	if ino, err := netns.Inode(base + "/ns/net"); err == nil && namespaces[ino] != "" {
		return "network namespace " + namespaces[ino]
	}
	if b, err := os.ReadFile(base + "/cgroup"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			// Lines are hierarchy-id:controllers:path.
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			for _, i := range l.Indices {
				root := "/" + cluster.CgroupName(i)
				if parts[2] == root || strings.HasPrefix(parts[2], root+"/") {
					return "cgroup " + parts[2]
				}
			}
		}
	}
	for _, link := range []string{"exe", "cwd", "root"} {
		if target, err := os.Readlink(base + "/" + link); err == nil && l.inside(strings.TrimSuffix(target, " (deleted)")) {
			return link + " " + target
		}
	}
	if b, err := os.ReadFile(base + "/cmdline"); err == nil {
		for _, arg := range strings.Split(string(b), "\x00") {
			// Flags carry paths as --flag=path.
			if _, v, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(arg, "-") {
				arg = v
			}
			if l.inside(arg) {
				return "argument " + arg
			}
		}
	}
	return ""
}

func (l Lab) inside(path string) bool {
	return path == l.Dir || strings.HasPrefix(path, l.Dir+"/")
}

// parent is the parent pid of pid, or 0 when it cannot be read.
func parent(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	// After the command name: state, then ppid.
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// Remove takes down everything the lab made, in an order that lets each step
// succeed: processes (so nothing holds mounts or cgroups, or recreates
// them), shim sockets (named in the lab's containerd state), mounts under
// the lab directory (deepest first), cgroups, network namespaces and veths,
// the CNI plugins' and kubelet's files outside the lab directory, and the
// directory itself. It works on whatever part exists, so it also cleans up
// after a failed bring-up, and does nothing the second time. What the labs
// of a host share (HostDirs) is left to the caller, which knows whether
// this lab is the last.
func Remove(l Lab, logf func(string, ...any)) error {
	if err := l.killAll(logf); err != nil {
		return err
	}
	errs := []error{removeEach(l.shimSockets, removeFile)}
	if err := l.unmountAll(); err != nil {
		// Without the unmounts, removing the directory would descend into
		// still-mounted volumes: stop here.
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs, removeEach(l.CgroupDirs, removeCgroupBy(time.Now().Add(cgroupBusyWait))))
	for _, i := range l.Indices {
		errs = append(errs, cluster.DeleteNetwork(i))
	}
	errs = append(errs, removeEach(l.HostFiles, os.RemoveAll))
	if err := os.RemoveAll(l.Dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", l.Dir, err))
	}
	return errors.Join(errs...)
}

// removeFile removes a file that may be gone already.
func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// removeCgroupBy returns what removes a cgroup directory with rmdir
// alone (its control files go with it). A cgroup stays busy while a
// process killed a moment ago is still exiting (its tasks file already
// empty), so a busy one is tried again until deadline.
func removeCgroupBy(deadline time.Time) func(string) error {
	return func(dir string) error {
		for {
			err := unix.Rmdir(dir)
			switch {
			case err == nil || errors.Is(err, unix.ENOENT):
				return nil
			case errors.Is(err, unix.EBUSY) && time.Now().Before(deadline):
				time.Sleep(100 * time.Millisecond)
			default:
				return fmt.Errorf("remove cgroup %s: %w", dir, err)
			}
		}
	}
}

// cgroupBusyWait is how long Remove tries busy cgroups again, all of them
// together.
const cgroupBusyWait = 5 * time.Second

// removeEach removes each thing list names, going on past failures.
func removeEach(list func() ([]string, error), remove func(string) error) error {
	items, err := list()
	if err != nil {
		return err
	}
	var errs []error
	for _, it := range items {
		errs = append(errs, remove(it))
	}
	return errors.Join(errs...)
}

// drain lists what is left and removes it, again and again while removing
// some brings more to light, at most rounds times; what is still listed
// after that is an error.
func drain[T any](rounds int, list func() ([]T, error), remove func([]T) error) ([]T, error) {
	for range rounds {
		left, err := list()
		if err != nil || len(left) == 0 {
			return left, err
		}
		if err := remove(left); err != nil {
			return left, err
		}
	}
	return list()
}

// killAll stops the lab's processes; containerd may start runc while it is
// being stopped, so it rescans until nothing is left.
func (l Lab) killAll(logf func(string, ...any)) error {
	left, err := drain(5, l.Processes, func(procs []Process) error {
		pids := make([]int, len(procs))
		for i, p := range procs {
			pids[i] = p.Pid
		}
		logf("stopping %d processes", len(pids))
		return proc.Kill(pids, 3*time.Second)
	})
	if err == nil && len(left) > 0 {
		err = errors.New("processes keep appearing in the lab's namespaces and cgroups")
	}
	return err
}

// shimSockets lists the sockets the lab's containerd shims made in
// shimSocketDir, as named in the lab's containerd state.
func (l Lab) shimSockets() ([]string, error) {
	files, err := filepath.Glob(filepath.Join(l.Dir, "*", "containerd", "state", "io.containerd.runtime.v2.task", "*", "*", "address"))
	if err != nil {
		return nil, err
	}
	var socks []string
	for _, f := range files {
		b, _ := os.ReadFile(f)
		sock := strings.TrimPrefix(strings.TrimSpace(string(b)), "unix://")
		if filepath.Dir(sock) == shimSocketDir {
			socks = append(socks, sock)
		}
	}
	return socks, nil
}

// Mounts lists the mount points under the lab directory, deepest first.
func (l Lab) Mounts() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("list mounts: %w", err)
	}
	var out []string
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	// Later lines are mounted later, on top of or below earlier ones.
	for i := len(lines) - 1; i >= 0; i-- {
		f := strings.Fields(lines[i])
		if len(f) < 5 {
			continue
		}
		if p := unescapeMountPath(f[4]); l.inside(p) {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return strings.Count(out[i], "/") > strings.Count(out[j], "/")
	})
	return out, nil
}

// unescapeMountPath undoes the octal escapes mountinfo uses for space, tab,
// newline and backslash.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountAll unmounts what is mounted under the lab directory; unmounting
// a mount uncovers the one below it, so it rescans until nothing is left.
func (l Lab) unmountAll() error {
	left, err := drain(10, l.Mounts, func(mounts []string) error {
		for _, m := range mounts {
			if err := unix.Unmount(m, 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				// Busy with a file a dead process's leftovers still
				// reference: detach it from the tree instead.
				if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
					return fmt.Errorf("unmount %s: %w", m, err)
				}
			}
		}
		return nil
	})
	if err == nil && len(left) > 0 {
		err = fmt.Errorf("mounts remain under %s: %s", l.Dir, strings.Join(left, ", "))
	}
	return err
}

// CgroupDirs lists the cgroups of the lab's clusters in every hierarchy,
// deepest first.
func (l Lab) CgroupDirs() ([]string, error) {
	mounts, err := cluster.CgroupMounts()
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, m := range mounts {
		for _, i := range l.Indices {
			root := filepath.Join(m.Path, cluster.CgroupName(i))
			err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
				if errors.Is(err, os.ErrNotExist) {
					return nil
				}
				if err != nil {
					return err
				}
				if d.IsDir() {
					dirs = append(dirs, path)
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("list cgroups under %s: %w", root, err)
			}
		}
	}
	sort.SliceStable(dirs, func(i, j int) bool {
		return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/")
	})
	return dirs, nil
}

// HostFiles lists the files outside the lab directory that the CNI plugins
// and the kubelet made for the lab's clusters: cached CNI results of the
// lab's pods, IP reservations of the lab's networks, and the kubelet's
// container log links that point into the lab directory.
func (l Lab) HostFiles() ([]string, error) {
	var out []string
	for _, i := range l.Indices {
		if _, err := os.Stat(filepath.Join(cniNetworksDir, cluster.NetworkName(i))); err == nil {
			out = append(out, filepath.Join(cniNetworksDir, cluster.NetworkName(i)))
		}
	}
	results, err := os.ReadDir(cniResultsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, e := range results {
		p := filepath.Join(cniResultsDir, e.Name())
		if l.ownsCNIResult(p) {
			out = append(out, p)
		}
	}
	links, err := os.ReadDir(containerLogsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, e := range links {
		p := filepath.Join(containerLogsDir, e.Name())
		if target, err := os.Readlink(p); err == nil && l.inside(target) {
			out = append(out, p)
		}
	}
	return out, nil
}

// ownsCNIResult reports whether a cached CNI result is of a lab pod: the
// pod's network namespace is mounted in the lab directory (containerd is
// configured so), and the lab's bridge networks have their own names.
func (l Lab) ownsCNIResult(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var cached struct {
		NetworkName string `json:"networkName"`
		Result      struct {
			Interfaces []struct {
				Sandbox string `json:"sandbox"`
			} `json:"interfaces"`
		} `json:"result"`
	}
	if json.Unmarshal(b, &cached) != nil {
		return false
	}
	for _, i := range l.Indices {
		if cached.NetworkName == cluster.NetworkName(i) {
			return true
		}
	}
	for _, itf := range cached.Result.Interfaces {
		if l.inside(itf.Sandbox) {
			return true
		}
	}
	return false
}

// Leftovers describes everything of the lab that still exists; empty means
// the lab is completely gone.
func (l Lab) Leftovers() ([]string, error) {
	var out []string
	procs, err := l.Processes()
	if err != nil {
		return nil, err
	}
	for _, p := range procs {
		out = append(out, fmt.Sprintf("process %d (%s)", p.Pid, p.Reason))
	}
	mounts, err := l.Mounts()
	if err != nil {
		return nil, err
	}
	for _, m := range mounts {
		out = append(out, "mount "+m)
	}
	cgroups, err := l.CgroupDirs()
	if err != nil {
		return nil, err
	}
	for _, c := range cgroups {
		out = append(out, "cgroup "+c)
	}
	for _, i := range l.Indices {
		out = append(out, cluster.NetworkLeftovers(i)...)
	}
	files, err := l.HostFiles()
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		out = append(out, "file "+f)
	}
	if _, err := os.Stat(l.Dir); err == nil {
		out = append(out, "directory "+l.Dir)
	}
	return out, nil
}
