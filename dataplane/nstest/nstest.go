package nstest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/peerlink/peerlink/internal/testenv"
)

// RequirePrivileged skips t unless the process is root and can create
// network namespaces with iproute2; under PEERLINK_REQUIRE_PRIVILEGED=1 it
// fails t instead.
func RequirePrivileged(t testing.TB) {
	t.Helper()
	var missing error
	if !testing.Short() {
		missing = Privileged()
	}
	testenv.Require(t, "privileged test", missing)
}

// Privileged reports why network namespaces cannot be created here, or nil.
func Privileged() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root (euid %d)", os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("needs iproute2's ip: %w", err)
	}
	ns, err := Create("probe")
	if err != nil {
		return err
	}
	return ns.Delete()
}

// NS is a named network namespace.
type NS struct {
	// Name is the name under /var/run/netns, for `ip netns exec`.
	Name string
	// Handle is an open handle on the namespace.
	Handle netns.NsHandle
}

// Create makes a network namespace whose name is prefix made unique, with
// its loopback link up.
func Create(prefix string) (*NS, error) {
	var suffix [3]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("pl-%s-%s", prefix, hex.EncodeToString(suffix[:]))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("create network namespace %s: %v: %s", name, err, bytes.TrimSpace(out))
	}
	h, err := netns.GetFromName(name)
	if err != nil {
		_ = exec.Command("ip", "netns", "del", name).Run()
		return nil, fmt.Errorf("open network namespace %s: %w", name, err)
	}
	ns := &NS{Name: name, Handle: h}
	if _, err := ns.Run("ip", "link", "set", "lo", "up"); err != nil {
		_ = ns.Delete()
		return nil, err
	}
	return ns, nil
}

// New creates a namespace for the test and deletes it when the test ends.
func New(t testing.TB, prefix string) *NS {
	t.Helper()
	ns, err := Create(prefix)
	if err != nil {
		t.Fatalf("nstest: %v", err)
	}
	t.Cleanup(func() {
		if err := ns.Delete(); err != nil {
			t.Errorf("nstest: %v", err)
		}
	})
	return ns
}

// Delete removes the namespace; its links go with it.
func (ns *NS) Delete() error {
	ns.Handle.Close()
	if out, err := exec.Command("ip", "netns", "del", ns.Name).CombinedOutput(); err != nil {
		return fmt.Errorf("delete network namespace %s: %v: %s", ns.Name, err, bytes.TrimSpace(out))
	}
	return nil
}

// Run runs a program in the namespace and returns its combined output.
func (ns *NS) Run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := ns.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("in %s: %s %s: %v: %s", ns.Name, name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
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

// Command prepares a program to run in the namespace.
func (ns *NS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// privateWireguardDir gives the program a /run/wireguard of its own, a
// tmpfs in the mount namespace `ip netns exec` creates, as a pod has one:
// two userspace WireGuard devices of the same name on one machine would
// otherwise both serve /var/run/wireguard/<name>.sock.
const privateWireguardDir = `mkdir -p /run/wireguard && mount -t tmpfs tmpfs /run/wireguard && exec "$0" "$@"`

// CommandWithOwnRun prepares a program to run in the namespace with a
// private /run/wireguard.
func (ns *NS) CommandWithOwnRun(ctx context.Context, name string, args ...string) *exec.Cmd {
	return ns.Command(ctx, "sh", append([]string{"-c", privateWireguardDir, name}, args...)...)
}

// Do runs f on an OS thread that has entered the namespace. Sockets f opens
// stay in the namespace after f returns; goroutines f starts do not.
func (ns *NS) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		// The thread is never unlocked: it ends with the goroutine, so it
		// is not reused in the wrong namespace.
		runtime.LockOSThread()
		if err := netns.Set(ns.Handle); err != nil {
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
		t.Fatalf("nstest: netlink handle in %s: %v", ns.Name, err)
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

// insideEnv marks a test binary that InNamespace re-executed inside a
// namespace.
const insideEnv = "PEERLINK_NSTEST_INSIDE"

// InNamespace runs the calling test again, alone, in a child process of the
// test binary started inside a fresh namespace, and reports false: the caller
// returns. In that child it reports true and the test body runs there, with
// every goroutine and socket of the process inside the namespace, as the
// agents run. The child's output is logged; its failure fails t.
func InNamespace(t *testing.T) bool {
	t.Helper()
	if os.Getenv(insideEnv) == t.Name() {
		return true
	}
	RequirePrivileged(t)
	ns := New(t, "test")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"-test.run=^" + t.Name() + "$", "-test.v"}
	cmd := ns.CommandWithOwnRun(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), insideEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	t.Logf("inside %s:\n%s", ns.Name, out)
	if err != nil {
		t.Fatalf("test inside namespace %s: %v", ns.Name, err)
	}
	if !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Fatalf("test inside namespace %s did not pass", ns.Name)
	}
	return false
}
