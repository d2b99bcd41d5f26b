package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
	"github.com/peerlink/peerlink/testkit/testenv"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// logWriter sends the lab's progress lines to the test log.
type logWriter struct {
	t  *testing.T
	mu sync.Mutex
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// phaseEnv names the phase of the tests a run takes (hack/e2e.sh sets it):
// "side-by-side" runs the tests that call sideBySide, "alone" those that
// call alone; unset, a run takes both, those alone first, as go test
// orders tests that run in parallel after the others.
const phaseEnv = "PEERLINK_E2E_PHASE"

// sideBySide marks a test that may run beside others, up to -parallel at a
// time: it brings up its own lab and bounds no time or memory, so the
// machine's other tests only slow it. Most of a lab test is waiting
// (clusters coming up, rollouts, handshakes), which the others fill.
func sideBySide(t *testing.T) {
	t.Helper()
	if phase(t) == "alone" {
		t.Skipf("runs side by side with other tests (%s=side-by-side)", phaseEnv)
	}
	t.Parallel()
}

// alone marks a test that runs with no other test beside it: it bounds a
// time or a memory figure (a failover, an endpoint change within a
// second, no request lost during a key rotation), which a loaded machine
// would break, or it needs what make test builds while the side-by-side
// tests run (Kubernetes' oldest supported minor).
func alone(t *testing.T) {
	t.Helper()
	if phase(t) == "side-by-side" {
		t.Skipf("runs alone (%s=alone)", phaseEnv)
	}
}

// phase returns the phase phaseEnv names, failing t on a value it does
// not take.
func phase(t *testing.T) string {
	t.Helper()
	switch p := os.Getenv(phaseEnv); p {
	case "", "alone", "side-by-side":
		return p
	default:
		t.Fatalf("%s=%q: want alone, side-by-side or nothing", phaseEnv, p)
		return ""
	}
}

// newLab brings up fresh clusters for one test, which has until timeout
// (the context's deadline), and removes them, checking that nothing is
// left, when the test ends.
func newLab(t *testing.T, timeout time.Duration, names ...string) (context.Context, *labctl.Lab) {
	t.Helper()
	return newLabWith(t, timeout, labctl.Options{Names: names})
}

// newLabWith is newLab with the clusters' nodes, pod network and ranges
// taken from o; its directory, repository and output are the test's.
func newLabWith(t *testing.T, timeout time.Duration, o labctl.Options) (context.Context, *labctl.Lab) {
	t.Helper()
	netns.RequirePrivileged(t)
	recordTime(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	// Registered first, so that it runs after the lab is down.
	t.Cleanup(cancel)
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := &logWriter{t: t}
	// Registered before Up so that a bring-up failing halfway is removed too.
	t.Cleanup(func() {
		if err := labctl.Down(dir, out); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	// Indices left to Up: the first free ones from 11, apart from a lab of
	// `make lab` (c1, c2) and from other test runs.
	o.Dir, o.Repo, o.Out = dir, repo, out
	l, err := labctl.Up(ctx, o)
	if err != nil {
		t.Fatalf("lab up: %v", err)
	}
	// Registered after Down's, so that it runs before the lab goes.
	t.Cleanup(func() { keepDiagnostics(t, l, repo) })
	return ctx, l
}

// diagnosticsTail is how many of the last lines of each peerlink pod's log
// a failed test prints (a tenth of it of every other component's log).
const diagnosticsTail = 400

// keepDiagnostics, when t failed, prints what tells why (the state of
// peerlink's objects and pods, events, the end of every component's log)
// and keeps the whole logs under bin/e2e-logs/<test> of the repository, or
// under $PEERLINK_E2E_LOGS/<test>.
func keepDiagnostics(t *testing.T, l *labctl.Lab, repo string) {
	if !t.Failed() {
		return
	}
	root := os.Getenv("PEERLINK_E2E_LOGS")
	if root == "" {
		root = filepath.Join(repo, "bin", "e2e-logs")
	}
	dir := filepath.Join(root, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())+time.Now().Format("-20060102-150405"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.Diagnostics(ctx, dir, &logWriter{t: t}, diagnosticsTail); err != nil {
		t.Logf("keep the diagnostics of the failed test: %v", err)
	}
	waitFailures.Range(func(name, msg any) bool {
		if name == t.Name() || strings.HasPrefix(name.(string), t.Name()+"/") {
			t.Logf("===== %s failed: %s", name, msg)
		}
		return true
	})
}

// recordTime adds, when t ends, a line of how long it took (its lab's
// bring-up and removal included) to the table of $PEERLINK_TEST_TIMES,
// which `make test` prints at its end (hack/timed.sh).
func recordTime(t *testing.T) {
	path := os.Getenv("PEERLINK_TEST_TIMES")
	if path == "" {
		return
	}
	start := time.Now()
	// Registered before the lab's cleanups, so that it runs after them.
	t.Cleanup(func() {
		outcome := "ok"
		if t.Failed() {
			outcome = "FAIL"
		}
		line := fmt.Sprintf("%d\t%s\te2e %s\ttest\n", int(time.Since(start).Seconds()), outcome, t.Name())
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, err = f.WriteString(line)
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			t.Logf("record the test's time: %v", err)
		}
	})
}

// waitFailures holds, by test name, the wait that failed a test or
// subtest, which keepDiagnostics says again after the logs: the end of a
// long output is what a reader sees first.
var waitFailures sync.Map

// newPeeredLab brings up a lab (newLab) and connects its first cluster to
// each of the others with `peerlink network connect`, as a user holding
// both kubeconfigs does, then waits until every peering is Connected.
func newPeeredLab(t *testing.T, timeout time.Duration, names ...string) (context.Context, *labctl.Lab) {
	t.Helper()
	return newPeeredLabWith(t, timeout, labctl.Options{Names: names})
}

// newPeeredLabWith is newPeeredLab with the options of newLabWith.
func newPeeredLabWith(t *testing.T, timeout time.Duration, o labctl.Options) (context.Context, *labctl.Lab) {
	t.Helper()
	ctx, l := newLabWith(t, timeout, o)
	first := l.Clusters[0]
	for _, peer := range l.Clusters[1:] {
		if out, err := l.Connect(ctx, first, peer); err != nil {
			t.Fatalf("connect %s to %s: %v\n%s", first.ClusterID, peer.ClusterID, err, out)
		}
	}
	for _, peer := range l.Clusters[1:] {
		waitConnected(t, ctx, l, first, peer)
	}
	return ctx, l
}

// nodeNS opens the network namespace of a node for the test; of a
// cluster's control-plane node when given the cluster.
func nodeNS(t *testing.T, node interface{ Namespace() string }) *netns.NS {
	t.Helper()
	ns, err := netns.Open(node.Namespace())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	return ns
}

// echoPods lists the echo pods of a cluster, which must be all there.
func echoPods(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster) []corev1.Pod {
	t.Helper()
	pods, err := l.EchoPods(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != labctl.EchoReplicas {
		t.Fatalf("cluster %s: %d echo pods, want %d", n.ClusterID, len(pods), labctl.EchoReplicas)
	}
	return pods
}

// TestLab checks the ground every other test stands on: clusters with the
// same pod range, pods reachable inside a cluster directly and through a
// Service, NodePorts reachable from the other cluster and from the host,
// and a teardown that leaves nothing behind.
func TestLab(t *testing.T) {
	sideBySide(t)
	ctx, l := newLab(t, 10*time.Minute, "lab-a", "lab-b")
	a, b := l.Clusters[0], l.Clusters[1]
	podRange := a.PodCIDR

	podsA, podsB := echoPods(t, ctx, l, a), echoPods(t, ctx, l, b)
	ipsA := map[string]bool{}
	for _, p := range podsA {
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil || !podRange.Contains(ip) {
			t.Fatalf("cluster %s: pod %s has IP %q, want one in %s", a.ClusterID, p.Name, p.Status.PodIP, podRange)
		}
		ipsA[p.Status.PodIP] = true
	}
	shared := 0
	for _, p := range podsB {
		if ipsA[p.Status.PodIP] {
			shared++
		}
	}
	if shared == 0 {
		t.Errorf("no pod IP of %s is also used in %s: the clusters' pod ranges should collide", b.ClusterID, a.ClusterID)
	}

	// Pod to pod, and pod to a ClusterIP Service through kube-proxy.
	src, dst := podsA[0], podsA[1]
	got, err := l.EchoGet(ctx, a, src.Name, fmt.Sprintf("http://%s:%d/", dst.Status.PodIP, labctl.EchoPort))
	if err != nil {
		t.Fatal(err)
	}
	if got.Reply.PodIP != dst.Status.PodIP || !strings.HasPrefix(got.Reply.Client, src.Status.PodIP+":") {
		t.Errorf("pod to pod in %s: got %+v, want an answer of %s seeing %s", a.ClusterID, got, dst.Status.PodIP, src.Status.PodIP)
	}
	if _, err := l.Kubectl(ctx, a, "-n", labctl.EchoNamespace, "expose", "deployment", labctl.EchoDeployment,
		"--name=echo-np", "--type=NodePort", fmt.Sprintf("--port=%d", labctl.EchoPort)); err != nil {
		t.Fatal(err)
	}
	cs, err := a.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	svc, err := cs.CoreV1().Services(labctl.EchoNamespace).Get(ctx, "echo-np", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clusterURL := fmt.Sprintf("http://%s:%d/", svc.Spec.ClusterIP, labctl.EchoPort)
	nodePortURL := fmt.Sprintf("http://%s:%d/", a.NodeIP(), svc.Spec.Ports[0].NodePort)
	eventually(t, ctx, "ClusterIP "+clusterURL+" answers", func() error {
		_, err := l.EchoGet(ctx, a, src.Name, clusterURL)
		return err
	})
	// Pods call Services by name, through the cluster's CoreDNS.
	nameURL := fmt.Sprintf("http://%s.%s.svc.%s:%d/", labctl.EchoDeployment, labctl.EchoNamespace, cluster.ClusterDomain, labctl.EchoPort)
	eventually(t, ctx, nameURL+" answers", func() error {
		_, err := l.EchoGet(ctx, a, src.Name, nameURL)
		return err
	})

	// A NodePort of one cluster from a pod of the other (leaving through the
	// node, masqueraded by the bridge plugin), and from the host.
	podB := podsB[0]
	eventually(t, ctx, "NodePort "+nodePortURL+" answers from "+b.ClusterID, func() error {
		got, err := l.EchoGet(ctx, b, podB.Name, nodePortURL)
		if err != nil {
			return err
		}
		if !ipsA[got.Reply.PodIP] {
			return fmt.Errorf("answered by %s, not an echo pod of %s", got.Reply.PodIP, a.ClusterID)
		}
		return nil
	})
	eventually(t, ctx, "NodePort "+nodePortURL+" answers from the host", func() error {
		resp, err := (&http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}).Get(nodePortURL)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	})

	// Take the lab down now, to check what the teardown leaves: Down
	// fails, naming them, when any process, mount, cgroup, network
	// namespace, interface or file of the lab is left. It checks under the
	// host lock; checked here, after it returns, a lab coming up side by
	// side would already hold the freed indices, and its namespaces and
	// interfaces would read as this lab's.
	if err := labctl.Down(l.Dir, &logWriter{t: t}); err != nil {
		t.Fatal(err)
	}
}

// eventuallyTimeout bounds each eventually, so that a test fails, and
// takes its clusters down, well before the test binary's own timeout.
const eventuallyTimeout = 90 * time.Second

// eventually retries check every half second until it passes, and fails the
// test when it has not passed within eventuallyTimeout.
func eventually(t *testing.T, ctx context.Context, what string, check func() error) {
	t.Helper()
	waitFor(t, ctx, eventuallyTimeout, what, check)
}

// waitFor is eventually for checks that may take longer: it fails the test
// when check has not passed within d.
func waitFor(t *testing.T, ctx context.Context, d time.Duration, what string, check func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var err error
	for {
		if err = check(); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("%s: %v", what, err)
			waitFailures.Store(t.Name(), msg)
			t.Fatal(msg)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
