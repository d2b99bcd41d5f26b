package labctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/sweep"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// hostStateDir records what the host was like before the first of the labs
// running on it changed it, so that the last lab to go down restores it,
// whichever that is: labs overlap (a `make lab` lab, the end-to-end tests'
// and the benchmark's), and one that comes up while another runs finds the
// host already changed.
const hostStateDir = "/run/peerlink-lab"

// hostState is what hostStateDir holds.
type hostState struct {
	// Forwarding is net.ipv4.ip_forward before the first lab.
	Forwarding string `json:"forwarding"`
	// Forwarding6 is net.ipv6.conf.all.forwarding before the first lab,
	// which labs with IPv6 turn on; empty in a record written before the
	// labs had IPv6.
	Forwarding6 string `json:"forwarding6,omitempty"`
	// CreatedDirs are the directories of sweep.HostDirs that did not
	// exist, or were empty, before the first lab.
	CreatedDirs []string `json:"createdDirs"`
	// Limits are the values of inotifyLimits' sysctls before the first
	// lab; empty in a record written before the labs raised them.
	Limits map[string]string `json:"limits,omitempty"`
}

// inotifyLimits are the host's inotify limits the labs need at least: every
// node's kubelet and containerd, and every pod that watches files, hold
// inotify instances of the host's one user (root), and Linux's default of
// 128 instances runs out at about ten nodes ("too many open files" from a
// kubelet's fsnotify), which labs side by side reach. A host's higher
// value is kept.
var inotifyLimits = []struct {
	key string
	min int
}{
	{"fs/inotify/max_user_instances", 8192},
	{"fs/inotify/max_user_watches", 1 << 20},
}

// raiseInotifyLimits raises the host's inotify limits to inotifyLimits.
func raiseInotifyLimits() error {
	for _, l := range inotifyLimits {
		v, err := netns.ReadSysctl(l.key)
		if err != nil {
			return err
		}
		if n, err := strconv.Atoi(v); err == nil && n >= l.min {
			continue
		}
		if err := netns.WriteSysctl(l.key, strconv.Itoa(l.min)); err != nil {
			return err
		}
	}
	return nil
}

func hostStateFile() string { return filepath.Join(hostStateDir, "host.json") }

// Cluster indices: 1 and 2 are `make lab`'s; labs that take free ones
// search from autoFirstIndex. An index is the third byte of 172.30.N.0/24.
const (
	autoFirstIndex = 11
	maxIndex       = 254
)

// lockHost takes the host-wide lock of the labs, which orders the choice of
// indices and the record of the host's state between labs starting and
// stopping at the same time. The returned function releases it.
func lockHost() (func(), error) {
	path := filepath.Join(hostStateDir, "lock")
	for {
		if err := os.MkdirAll(hostStateDir, 0o755); err != nil {
			return nil, fmt.Errorf("host lock: %w", err)
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, fmt.Errorf("host lock: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("host lock: %w", err)
		}
		// The last lab to go removes the lock file: a lock taken on a file
		// removed meanwhile locks nothing, so take it again.
		var held, named unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) == nil && unix.Stat(path, &named) == nil && held.Ino == named.Ino {
			return func() {
				_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
				f.Close()
			}, nil
		}
		f.Close()
	}
}

// takenIndex returns the first of count indices from first that a lab
// uses (its namespace, its veth or its cgroup exists), or 0.
func takenIndex(first, count int) int {
	cgroups, _ := cluster.CgroupMounts()
	for i := first; i < first+count; i++ {
		if len(cluster.NetworkLeftovers(i)) > 0 {
			return i
		}
		for _, m := range cgroups {
			if _, err := os.Stat(filepath.Join(m.Path, cluster.CgroupName(i))); err == nil {
				return i
			}
		}
	}
	return 0
}

// freeIndices returns the first index from start of a block of count free
// ones.
func freeIndices(start, count int) (int, error) {
	for first := start; first+count-1 <= maxIndex; first++ {
		if taken := takenIndex(first, count); taken != 0 {
			first = taken
			continue
		}
		return first, nil
	}
	return 0, fmt.Errorf("no %d free cluster indices between %d and %d", count, start, maxIndex)
}

// otherLabs reports whether a lab's veth is on the host; called after this
// lab's own are gone, it tells whether this lab was the last.
func otherLabs() bool {
	links, _ := filepath.Glob("/sys/class/net/" + cluster.HostIfPrefix + "*")
	return len(links) > 0
}

// claimHost records the host's state before the first lab changes it. A
// record already there is kept: either another lab runs, or a lab that
// did not go down left it, and in both cases it holds the values from
// before any lab.
func claimHost() error {
	if _, err := os.Stat(hostStateFile()); err == nil {
		return nil
	}
	forwarding, err := netns.ReadSysctl("net/ipv4/ip_forward")
	if err != nil {
		return err
	}
	forwarding6, err := netns.ReadSysctl("net/ipv6/conf/all/forwarding")
	if err != nil {
		return err
	}
	h := hostState{Forwarding: forwarding, Forwarding6: forwarding6, Limits: map[string]string{}}
	for _, l := range inotifyLimits {
		if h.Limits[l.key], err = netns.ReadSysctl(l.key); err != nil {
			return err
		}
	}
	recorded := map[string]bool{}
	// Children come before parents: a directory holding nothing but
	// recorded ones holds nothing of anyone either (a previous lab's).
	for _, d := range sweep.HostDirs() {
		entries, err := os.ReadDir(d)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("host state: %w", err)
		}
		empty := true
		for _, e := range entries {
			if !recorded[filepath.Join(d, e.Name())] {
				empty = false
			}
		}
		if empty {
			recorded[d] = true
			h.CreatedDirs = append(h.CreatedDirs, d)
		}
	}
	b, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(hostStateDir, 0o755); err != nil {
		return fmt.Errorf("host state: %w", err)
	}
	if err := os.WriteFile(hostStateFile(), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("host state: %w", err)
	}
	return nil
}

// releaseHost restores the host when no lab is left on it: forwarding as it
// was, and the directories the labs' components made removed once empty
// (a containerd or kubelet of the host itself would keep files in them).
// Called with the host lock held.
func releaseHost() error {
	if otherLabs() {
		return nil
	}
	b, err := os.ReadFile(hostStateFile())
	if errors.Is(err, os.ErrNotExist) {
		return os.RemoveAll(hostStateDir)
	}
	if err != nil {
		return fmt.Errorf("host state: %w", err)
	}
	var h hostState
	if err := json.Unmarshal(b, &h); err != nil {
		return fmt.Errorf("host state %s: %w", hostStateFile(), err)
	}
	var errs []error
	restore := map[string]string{"net/ipv4/ip_forward": h.Forwarding, "net/ipv6/conf/all/forwarding": h.Forwarding6}
	maps.Copy(restore, h.Limits)
	for key, was := range restore {
		if was == "" {
			continue
		}
		if err := netns.WriteSysctl(key, was); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range h.CreatedDirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ENOTEMPTY) {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		// The lock file goes too; see lockHost.
		if err := os.RemoveAll(hostStateDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// hostLeftovers describes what of the labs' changes to the host is left
// although no lab runs any more.
func hostLeftovers() ([]string, error) {
	if otherLabs() {
		return nil, nil
	}
	var out []string
	if _, err := os.Stat(hostStateDir); err == nil {
		out = append(out, "directory "+hostStateDir)
	}
	for _, d := range sweep.HostDirs() {
		// A directory something else has put files in is not the labs'
		// alone; the labs' own files in it are checked by sweep.
		if entries, err := os.ReadDir(d); err == nil && len(entries) == 0 {
			out = append(out, "empty directory "+d)
		}
	}
	return out, nil
}
