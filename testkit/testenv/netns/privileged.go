package netns

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/peerlink/peerlink/testkit/testenv"
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

// insideEnv marks a test binary that InNamespace re-executed inside a
// namespace.
const insideEnv = "PEERLINK_NETNS_INSIDE"

// InNamespace runs the calling test again, alone, in a child process of the
// test binary started inside a fresh namespace, and reports false: the caller
// returns. In that child it reports true and the test body runs there, with
// every goroutine and socket of the process inside the namespace, as the
// agents run (AsPod). The child's output is logged; its failure fails t.
func InNamespace(t *testing.T) bool {
	t.Helper()
	if os.Getenv(insideEnv) == t.Name() {
		return true
	}
	RequirePrivileged(t)
	ns := New(t, "test")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	argv := AsPod(ns.Name, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
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
