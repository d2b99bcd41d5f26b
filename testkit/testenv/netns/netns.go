package netns

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Dir is where iproute2 keeps the bind mounts of named network namespaces.
const Dir = "/var/run/netns"

// runTimeout bounds one program run with Run.
const runTimeout = time.Minute

// Path is the file that names the namespace, for nsenter --net= and for
// comparing it with a process's (Inode).
func Path(name string) string {
	return filepath.Join(Dir, name)
}

// Exists reports whether the named namespace exists.
func Exists(name string) bool {
	_, err := os.Stat(Path(name))
	return err == nil
}

// NS is a named network namespace.
type NS struct {
	// Name is the name under Dir, for `ip netns exec`.
	Name string
	// Handle is an open handle on the namespace.
	Handle vnetns.NsHandle
}

// Create makes a network namespace whose name is prefix made unique, with
// its loopback link up.
func Create(prefix string) (*NS, error) {
	var suffix [3]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return nil, fmt.Errorf("name a network namespace %s: %w", prefix, err)
	}
	return add(fmt.Sprintf("pl-%s-%s", prefix, hex.EncodeToString(suffix[:])))
}

// add makes the namespace name, with its loopback link up.
func add(name string) (*NS, error) {
	if _, err := run("ip", "netns", "add", name); err != nil {
		return nil, fmt.Errorf("create network namespace %s: %w", name, err)
	}
	ns, err := Open(name)
	if err != nil {
		return nil, errors.Join(err, Remove(name))
	}
	if _, err := ns.Run("ip", "link", "set", "lo", "up"); err != nil {
		return nil, errors.Join(err, ns.Delete())
	}
	return ns, nil
}

// New creates a namespace for the test and deletes it when the test ends.
func New(t testing.TB, prefix string) *NS {
	t.Helper()
	ns, err := Create(prefix)
	if err != nil {
		t.Fatalf("netns: %v", err)
	}
	t.Cleanup(func() {
		if err := ns.Delete(); err != nil {
			t.Errorf("netns: %v", err)
		}
	})
	return ns
}

// Open opens the existing namespace name. Close releases the handle and
// leaves the namespace.
func Open(name string) (*NS, error) {
	h, err := vnetns.GetFromPath(Path(name))
	if err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", name, err)
	}
	return &NS{Name: name, Handle: h}, nil
}

// Close releases the handle on the namespace.
func (ns *NS) Close() error {
	return ns.Handle.Close()
}

// Delete releases the handle and removes the namespace; its links go with
// it.
func (ns *NS) Delete() error {
	return errors.Join(ns.Close(), Remove(ns.Name))
}

// Remove removes the named namespace; one that does not exist is not an
// error.
func Remove(name string) error {
	if !Exists(name) {
		return nil
	}
	if _, err := run("ip", "netns", "del", name); err != nil {
		return fmt.Errorf("delete network namespace %s: %w", name, err)
	}
	return nil
}

// Run runs a program in the namespace and returns its combined output.
func (ns *NS) Run(name string, args ...string) (string, error) {
	return run(inside(ns.Name, append([]string{name}, args...))...)
}

// MustRun is Run that fails t on error.
func (ns *NS) MustRun(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := ns.Run(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Command prepares a program to run in the namespace, in a mount namespace
// of its own where /sys shows the namespace's links (`ip netns exec`).
func (ns *NS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	argv := inside(ns.Name, append([]string{name}, args...))
	return exec.CommandContext(ctx, argv[0], argv[1:]...)
}

// inside is the command line that runs argv in the named namespace with
// `ip netns exec`.
func inside(name string, argv []string) []string {
	return append([]string{"ip", "netns", "exec", name}, argv...)
}

// privateWireguardDir gives the program a /run/wireguard of its own, a
// tmpfs in the mount namespace `ip netns exec` creates, as a pod has one:
// two userspace WireGuard devices of the same name on one machine would
// otherwise both serve /var/run/wireguard/<name>.sock.
const privateWireguardDir = `mkdir -p /run/wireguard && mount -t tmpfs tmpfs /run/wireguard && exec "$0" "$@"`

// AsPod returns the command line that runs argv in the named namespace as a
// pod's container runs: in mounts of its own, where /sys shows the
// namespace's links and /run/wireguard is private. `ip netns exec` and the
// shell both exec, so the process started is argv's program itself.
func AsPod(name string, argv ...string) []string {
	return inside(name, append([]string{"sh", "-c", privateWireguardDir}, argv...))
}

// Enter returns the command line that runs argv in the named namespace and
// in the caller's mount namespace, so that what the program mounts the host
// sees. nsenter execs, so the process started is argv's program itself.
func Enter(name string, argv ...string) []string {
	return append([]string{"nsenter", "--net=" + Path(name), "--"}, argv...)
}

// run runs a program, for at most runTimeout, and returns its combined
// output; an error names the command line and carries the output.
func run(argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// Do runs f on an OS thread that has entered the namespace. Sockets f opens
// stay in the namespace after f returns; goroutines f starts do not.
func (ns *NS) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		// The thread is never unlocked: it ends with the goroutine, so it
		// is not reused in the wrong namespace.
		runtime.LockOSThread()
		if err := vnetns.Set(ns.Handle); err != nil {
			errc <- fmt.Errorf("enter network namespace %s: %w", ns.Name, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// Netlink returns a netlink handle in the namespace, closed when the test
// ends.
func (ns *NS) Netlink(t testing.TB) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandleAt(ns.Handle)
	if err != nil {
		t.Fatalf("netns: netlink handle in %s: %v", ns.Name, err)
	}
	t.Cleanup(h.Close)
	return h
}

// Veth joins two namespaces with a veth pair named aName in a and bName in
// b, both up.
func Veth(a *NS, aName string, b *NS, bName string) error {
	if _, err := a.Run("ip", "link", "add", aName, "type", "veth", "peer", "name", bName, "netns", b.Name); err != nil {
		return err
	}
	if _, err := a.Run("ip", "link", "set", aName, "up"); err != nil {
		return err
	}
	_, err := b.Run("ip", "link", "set", bName, "up")
	return err
}

// End is one end of the veth Joined makes: the prefix of its namespace's
// name (New), the link's name there and the address it carries.
type End struct {
	Prefix string
	Link   string
	// Addr is an address with its prefix length, as 10.9.0.1/24; empty:
	// none.
	Addr string
}

// Joined creates two namespaces for the test (New), joined by a veth whose
// ends are up and carry their addresses. It skips t as RequirePrivileged
// does, and fails it on error.
func Joined(t testing.TB, a, b End) (*NS, *NS) {
	t.Helper()
	RequirePrivileged(t)
	nsA, nsB := New(t, a.Prefix), New(t, b.Prefix)
	if err := Veth(nsA, a.Link, nsB, b.Link); err != nil {
		t.Fatalf("netns: %v", err)
	}
	for _, e := range []struct {
		ns *NS
		End
	}{{nsA, a}, {nsB, b}} {
		if e.Addr != "" {
			e.ns.MustRun(t, "ip", "addr", "add", e.Addr, "dev", e.Link)
		}
	}
	return nsA, nsB
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
// inodes of their /proc/<pid>/ns/net are equal, and a process is in a named
// namespace when its inode is that of Path(name).
func Inode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	return st.Ino, nil
}
