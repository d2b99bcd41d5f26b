package netns

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is where iproute2 keeps the bind mounts of named network namespaces;
// nsenter --net= takes a path below it.
const Dir = "/var/run/netns"

// Pair is a named network namespace joined to the host by a veth pair: the
// host end HostIf carries HostAddr, the end inside the namespace is eth0 and
// carries NodeAddr, and the namespace routes everything through HostAddr.
type Pair struct {
	Namespace string
	HostIf    string
	HostAddr  netip.Prefix
	NodeAddr  netip.Prefix
}

// Path is the file that names the namespace for nsenter --net=.
func Path(name string) string {
	return filepath.Join(Dir, name)
}

// Exists reports whether the named namespace exists.
func Exists(name string) bool {
	_, err := os.Stat(Path(name))
	return err == nil
}

// Create makes the namespace and the veth pair, brings up lo and eth0 inside,
// sets the default route and enables forwarding in the namespace (pods behind
// the CNI bridge are routed through it). It fails when the namespace exists.
func Create(p Pair) error {
	if Exists(p.Namespace) {
		return fmt.Errorf("network namespace %s: already exists", p.Namespace)
	}
	steps := [][]string{
		{"netns", "add", p.Namespace},
		{"link", "add", p.HostIf, "type", "veth", "peer", "name", "eth0", "netns", p.Namespace},
		{"addr", "add", p.HostAddr.String(), "dev", p.HostIf},
		{"link", "set", p.HostIf, "up"},
		{"-n", p.Namespace, "link", "set", "lo", "up"},
		{"-n", p.Namespace, "addr", "add", p.NodeAddr.String(), "dev", "eth0"},
		{"-n", p.Namespace, "link", "set", "eth0", "up"},
		{"-n", p.Namespace, "route", "add", "default", "via", p.HostAddr.Addr().String()},
	}
	for _, args := range steps {
		if err := ip(args...); err != nil {
			return fmt.Errorf("network namespace %s: %w", p.Namespace, err)
		}
	}
	return Do(p.Namespace, func() error {
		// The bridge netfilter switch makes pod-to-service traffic between pods
		// of the same bridge go through kube-proxy's rules.
		for key, value := range map[string]string{
			"net/ipv4/ip_forward":                 "1",
			"net/bridge/bridge-nf-call-iptables":  "1",
			"net/bridge/bridge-nf-call-ip6tables": "1",
		} {
			if err := WriteSysctl(key, value); err != nil {
				return fmt.Errorf("network namespace %s: %w", p.Namespace, err)
			}
		}
		return nil
	})
}

// Delete removes the host end of the veth pair and the namespace. Missing
// pieces are not an error, so Delete also cleans up after a partial Create.
func Delete(p Pair) error {
	var errs []error
	if _, err := os.Stat(filepath.Join("/sys/class/net", p.HostIf)); err == nil {
		if err := ip("link", "del", p.HostIf); err != nil {
			errs = append(errs, err)
		}
	}
	if Exists(p.Namespace) {
		if err := ip("netns", "del", p.Namespace); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Do runs fn on an OS thread that has joined the named network namespace.
// The thread is locked and never unlocked, so the runtime discards it when fn
// returns instead of reusing a thread in the wrong namespace.
func Do(name string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(Path(name))
		if err != nil {
			errc <- fmt.Errorf("open network namespace %s: %w", name, err)
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter network namespace %s: %w", name, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// ReadSysctl reads a sysctl of the calling thread's network namespace; key is
// the path below /proc/sys.
func ReadSysctl(key string) (string, error) {
	b, err := os.ReadFile(filepath.Join("/proc/sys", key))
	if err != nil {
		return "", fmt.Errorf("read sysctl %s: %w", key, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// WriteSysctl sets a sysctl of the calling thread's network namespace.
func WriteSysctl(key, value string) error {
	if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644); err != nil {
		return fmt.Errorf("write sysctl %s=%s: %w", key, value, err)
	}
	return nil
}

// Inode identifies a network namespace: two processes share one when the
// inodes of their /proc/<pid>/ns/net are equal.
func Inode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	return st.Ino, nil
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
