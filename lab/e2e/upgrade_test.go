package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/images"
	"github.com/peerlink/peerlink/lab/internal/labctl"
	"github.com/peerlink/peerlink/testkit/testenv"
)

// maxRecreatePause bounds the time without an answer while an install
// recreates a gateway's pods (strategy Recreate: the old pods terminate
// before the new ones start): a gateway of one replica upgraded, or any
// gateway going back to the previous release, which recreates them
// whatever the replicas. It is longer than a deleted pod's
// maxRestartOutage by the old pod's termination, which the new one waits
// for. Measured: one replica 1.5 to 2.9 s on the client's side, 1.8 to
// 12 s on the server's (the old pod's end, the new one's start, and the
// peer's next handshake); two replicas going back 1.9 to 11 s.
const maxRecreatePause = 20 * time.Second

// upgradeProbeTimeout is the time limit of each request of TestUpgrade's
// probes: 5 s, the connect timeout Envoy gives a cluster by default and
// shorter than most clients' (curl's and the kernel's SYN retries wait
// minutes). A hand-over of the Lease loses the packets of its 0.15 to 0.8 s;
// TCP sends a lost SYN again after 1 s and other segments sooner, so a
// request caught in it is answered late, not lost. ProbeTimeout's 1 s
// would count each such request as failed; TestGatewayHA measures that.
const upgradeProbeTimeout = 5 * time.Second

// upgradeSide is a cluster of TestUpgrade, its peer and the way peerlink
// is installed in it.
type upgradeSide struct {
	n, peer *cluster.Cluster
	how     labctl.Installer
	// probe is the name of the probe that runs in n, calling a pod of
	// peer.
	probe string
}

// TestUpgrade installs the previous release (labctl.PreviousRelease, built
// from the repository's history by the lab) in two clusters of two nodes,
// one with kubectl apply -k and one with helm install, and peers them with
// two gateway replicas on each side. While a pod of each cluster sends a
// request every 50 ms to a pod of the other, each cluster is upgraded to
// the tree in turn, the way it was installed (kubectl apply -k; the
// chart's CRDs applied and helm upgrade): each gateway must roll once, one
// pod at a time, a Ready pod left throughout, the traffic must not go the
// Lease's duration without a prompt answer, and no request may fail
// (upgradeProbeTimeout: the requests caught in a hand-over of the Lease
// are answered late, and printed). The new controller gives the previous
// release's active pod the deletion cost its own pods set, so the tunnel
// is handed over once, not first to the old standby. A restart of the
// new controllers then must not touch the gateways, whose rendered pods
// did not change. Then both go back to the previous release, which must
// work, its pause under maxRecreatePause. Last, with one gateway replica
// per side, the upgrade again: the pause of each side's only gateway pod
// replaced is printed and must stay under maxRecreatePause too.
func TestUpgrade(t *testing.T) {
	alone(t)
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	commit, err := labctl.PreviousRelease(repo)
	if err != nil {
		t.Fatal(err)
	}
	// A shallow clone may lack the release's commit: that is the clone's
	// choice, not a failure of the upgrade. A full clone without it fails
	// in ExtractRelease, naming the commit.
	if shallow, _ := exec.Command("git", "-C", repo, "rev-parse", "--is-shallow-repository").Output(); strings.TrimSpace(string(shallow)) == "true" &&
		exec.Command("git", "-C", repo, "cat-file", "-e", commit+"^{commit}").Run() != nil {
		t.Skipf("the repository is a shallow clone without the previous release %s: git fetch --unshallow gives it", commit)
	}
	prev, err := labctl.ExtractRelease(t.Context(), repo, commit, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, l := newLabWith(t, 25*time.Minute, labctl.Options{
		Names:      []string{"up-a", "up-b"},
		Nodes:      2,
		Installers: []labctl.Installer{labctl.Kustomize, labctl.Helm},
		Previous:   &prev,
	})
	a, b := l.Clusters[0], l.Clusters[1]
	sides := []upgradeSide{{a, b, labctl.Kustomize, "up-probe-a"}, {b, a, labctl.Helm, "up-probe-b"}}
	oldImage := images.AgentImageTagged(prev.Version)
	for _, s := range sides {
		checkControllerImage(t, l, s.n, oldImage)
	}
	if out, err := l.Connect(ctx, a, b, "--gw-server-replicas=2", "--gw-client-replicas=2"); err != nil {
		t.Fatalf("connect: %v\n%s", err, out)
	}
	waitConnected(t, ctx, l, a, b)
	for _, s := range sides {
		waitReplicas(t, ctx, s.n)
		startProbe(t, ctx, l, s.n, s.peer, s.probe, haProbeInterval, upgradeProbeTimeout, 20*time.Minute)
	}

	ok := t.Run("two replicas, upgrade", func(t *testing.T) {
		for _, s := range sides {
			active, _ := waitReplicas(t, ctx, s.n)
			lease := leaseDuration(t, ctx, s.n, active)
			start, took := rollRelease(t, ctx, l, s, "upgrade", l.Upgrade, images.AgentImage, true)
			checkControllerImage(t, l, s.n, images.AgentImage)
			for _, p := range sides {
				sent, failed := failedRequests(t, ctx, l, p.n, p.probe, start, start.Add(took))
				gap := pause(t, ctx, l, p, start, took)
				late, slowest := lateAnswers(t, ctx, l, p, start, took)
				t.Logf("%s upgraded (%s) in %.1fs: %s -> %s: %d of %d requests failed, %d answered after %v (slowest %.2fs), longest pause %.2fs",
					s.n.Name, s.how, took.Seconds(), p.n.Name, p.peer.Name, failed, sent, late, labctl.ProbeTimeout, slowest.Seconds(), gap.Seconds())
				if want := int(took / haProbeInterval / 2); failed > 0 || sent < want {
					t.Errorf("%s upgraded: %s -> %s: %d of %d requests failed, want none of at least %d", s.n.Name, p.n.Name, p.peer.Name, failed, sent, want)
				}
				if gap >= lease {
					t.Errorf("%s upgraded: %s -> %s went %.2fs without an answer, not under the Lease's duration (%v): the tunnel waited for more than a hand-over of the Lease",
						s.n.Name, p.n.Name, p.peer.Name, gap.Seconds(), lease)
				}
			}
		}
		waitConnected(t, ctx, l, a, b)
	})
	if !ok {
		t.FailNow()
	}

	t.Run("controller restart leaves the gateways", func(t *testing.T) {
		for _, s := range sides {
			gw := gatewayDeployment(t, ctx, s.n, s.peer)
			before := gatewayState(t, ctx, s.n, gw)
			for _, args := range [][]string{
				{"rollout", "restart", "deployment/peerlink-controller"},
				{"rollout", "status", "deployment/peerlink-controller", "--timeout=3m"},
			} {
				if out, err := l.Kubectl(ctx, s.n, append([]string{"-n", labctl.PeerlinkNamespace}, args...)...); err != nil {
					t.Fatalf("%s: kubectl %v: %v\n%s", s.n.Name, args, err, out)
				}
			}
			// The new controller leads at once (the old one released its
			// Lease) and reconciles every gateway within this.
			time.Sleep(haWatch)
			if after := gatewayState(t, ctx, s.n, gw); after != before {
				t.Errorf("%s: the controller's restart changed the gateway: before %s, after %s", s.n.Name, before, after)
			} else {
				t.Logf("%s: controller restarted, gateway untouched: %s", s.n.Name, after)
			}
		}
	})

	t.Run("two replicas, downgrade", func(t *testing.T) {
		for _, s := range sides {
			start, took := rollRelease(t, ctx, l, s, "downgrade", l.Downgrade, oldImage, false)
			checkControllerImage(t, l, s.n, oldImage)
			for _, p := range sides {
				sent, failed := failedRequests(t, ctx, l, p.n, p.probe, start, start.Add(took))
				gap := pause(t, ctx, l, p, start, took)
				t.Logf("%s back to %s (%s) in %.1fs: %s -> %s: %d of %d requests failed, longest pause %.2fs",
					s.n.Name, prev.Version, s.how, took.Seconds(), p.n.Name, p.peer.Name, failed, sent, gap.Seconds())
				if gap > maxRecreatePause {
					t.Errorf("%s back to %s: %s -> %s went %.2fs without an answer, want at most %v", s.n.Name, prev.Version, p.n.Name, p.peer.Name, gap.Seconds(), maxRecreatePause)
				}
			}
		}
		waitConnected(t, ctx, l, a, b)
		for _, s := range sides {
			waitAnswered(t, ctx, l, s.n, s.probe)
		}
	})

	t.Run("one replica, upgrade", func(t *testing.T) {
		for _, s := range sides {
			if err := l.ScaleGateways(ctx, s.n, 1); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range sides {
			waitAnswered(t, ctx, l, s.n, s.probe)
		}
		for _, s := range sides {
			start, took := rollRelease(t, ctx, l, s, "upgrade", l.Upgrade, images.AgentImage, false)
			for _, p := range sides {
				sent, failed := failedRequests(t, ctx, l, p.n, p.probe, start, start.Add(took))
				gap := pause(t, ctx, l, p, start, took)
				t.Logf("one replica: %s upgraded (%s) in %.1fs: %s -> %s: pause %.2fs, %d of %d requests failed",
					s.n.Name, s.how, took.Seconds(), p.n.Name, p.peer.Name, gap.Seconds(), failed, sent)
				if gap > maxRecreatePause {
					t.Errorf("one replica: %s upgraded: %s -> %s went %.2fs without an answer, want at most %v", s.n.Name, p.n.Name, p.peer.Name, gap.Seconds(), maxRecreatePause)
				}
			}
		}
		waitConnected(t, ctx, l, a, b)
	})
}

// rollRelease installs a release in s.n with install (l.Upgrade or
// l.Downgrade, what says which for the log) and waits until its gateway
// has rolled out to image, then watches the traffic for haWatch more. It
// returns when the install started and how long all of it took. The
// gateway must roll once and, when oneAtATime, one pod at a time: a Ready
// pod left throughout.
func rollRelease(t *testing.T, ctx context.Context, l *labctl.Lab, s upgradeSide, what string,
	install func(context.Context, *cluster.Cluster, labctl.Installer) error, image string, oneAtATime bool) (time.Time, time.Duration) {
	t.Helper()
	gw := gatewayDeployment(t, ctx, s.n, s.peer)
	revision := gatewayRevision(t, ctx, s.n, gw)
	fewest := watchReadyGateways(ctx, s.n)
	start := time.Now()
	if err := install(ctx, s.n, s.how); err != nil {
		fewest()
		t.Fatalf("%s %s (%s): %v", what, s.n.Name, s.how, err)
	}
	installed := time.Since(start)
	eventually(t, ctx, fmt.Sprintf("%s: the gateway rolls out to %s", s.n.Name, image), func() error {
		return rolledOut(ctx, s.n, gw, image)
	})
	rolled := time.Since(start)
	least := fewest()
	time.Sleep(haWatch)
	t.Logf("%s: %s (%s): controller and fabric running in %.1fs, gateway rolled out to %s in %.1fs, fewest Ready gateway pods %d",
		s.n.Name, what, s.how, installed.Seconds(), image, rolled.Seconds(), least)
	if oneAtATime && least < 1 {
		t.Errorf("%s: %s: during the gateway's rollout it had %d Ready pods: its replicas did not roll one at a time", s.n.Name, what, least)
	}
	// One rollout: the rendered pod changed once, not back and forth
	// between what the controllers of two releases render.
	if got := gatewayRevision(t, ctx, s.n, gw); got != revision+1 {
		t.Errorf("%s: %s: the gateway Deployment is at revision %d, %d before: it rolled out %d times, want once", s.n.Name, what, got, revision, got-revision)
	}
	return start, time.Since(start)
}

// rolledOut says why the gateway Deployment gw of n has not rolled out to
// image yet: its pod template names another, or pods of an older template
// remain.
func rolledOut(ctx context.Context, n *cluster.Cluster, gw metav1.ObjectMeta, image string) error {
	cs, err := n.Clientset()
	if err != nil {
		return err
	}
	d, err := cs.AppsV1().Deployments(gw.Namespace).Get(ctx, gw.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Image != image {
			return fmt.Errorf("container %s runs %s", c.Name, c.Image)
		}
	}
	want := *d.Spec.Replicas
	st := d.Status
	if st.ObservedGeneration != d.Generation || st.UpdatedReplicas != want || st.Replicas != want || st.AvailableReplicas != want {
		return fmt.Errorf("generation %d observed %d, %d replicas, %d updated, %d available, want %d", d.Generation, st.ObservedGeneration, st.Replicas, st.UpdatedReplicas, st.AvailableReplicas, want)
	}
	return nil
}

// getDeployment reads the Deployment of n that gw names.
func getDeployment(t *testing.T, ctx context.Context, n *cluster.Cluster, gw metav1.ObjectMeta) *appsv1.Deployment {
	t.Helper()
	cs, err := n.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	d, err := cs.AppsV1().Deployments(gw.Namespace).Get(ctx, gw.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	return d
}

// gatewayRevision is the revision of the gateway Deployment gw of n,
// which each rollout raises by one, even to the pod template of an
// earlier one.
func gatewayRevision(t *testing.T, ctx context.Context, n *cluster.Cluster, gw metav1.ObjectMeta) int {
	t.Helper()
	d := getDeployment(t, ctx, n, gw)
	rev, err := strconv.Atoi(d.Annotations[revisionAnnotation])
	if err != nil {
		t.Fatalf("%s: Deployment %s: annotation %s: %v", n.Name, d.Name, revisionAnnotation, err)
	}
	return rev
}

// revisionAnnotation is where the Deployment controller writes a
// Deployment's revision.
const revisionAnnotation = "deployment.kubernetes.io/revision"

// gatewayState sums up what a restart of the gateway of n would change:
// its Deployment's generation and its pods with their restarts.
func gatewayState(t *testing.T, ctx context.Context, n *cluster.Cluster, gw metav1.ObjectMeta) string {
	t.Helper()
	d := getDeployment(t, ctx, n, gw)
	pods, err := gatewayPods(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	s := fmt.Sprintf("Deployment %s generation %d, pods", d.Name, d.Generation)
	for _, p := range pods {
		restarts := int32(0)
		for _, c := range p.Status.ContainerStatuses {
			restarts += c.RestartCount
		}
		s += fmt.Sprintf(" %s (%d restarts)", p.Name, restarts)
	}
	return s
}

// pause is the longest time probe p went without an answer from start to
// took after it.
func pause(t *testing.T, ctx context.Context, l *labctl.Lab, p upgradeSide, start time.Time, took time.Duration) time.Duration {
	t.Helper()
	res, err := l.ProbeResults(ctx, p.n, p.probe)
	if err != nil {
		t.Fatal(err)
	}
	return labctl.LongestGap(res, start, start.Add(took))
}

// lateAnswers counts the requests probe p sent from start to took after it
// that were answered after labctl.ProbeTimeout, and returns the slowest
// answer's time.
func lateAnswers(t *testing.T, ctx context.Context, l *labctl.Lab, p upgradeSide, start time.Time, took time.Duration) (late int, slowest time.Duration) {
	t.Helper()
	res, err := l.ProbeResults(ctx, p.n, p.probe)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if at := time.UnixMilli(r.UnixMilli); !r.OK || at.Before(start) || at.After(start.Add(took)) {
			continue
		}
		d := time.Duration(r.Millis) * time.Millisecond
		slowest = max(slowest, d)
		if d > labctl.ProbeTimeout {
			late++
		}
	}
	return late, slowest
}

// checkControllerImage fails t unless the controller of n runs image.
func checkControllerImage(t *testing.T, l *labctl.Lab, n *cluster.Cluster, image string) {
	t.Helper()
	for _, c := range controller(t, l, n).Spec.Template.Spec.Containers {
		if c.Image != image {
			t.Errorf("%s: the controller's container %s runs %s, want %s", n.Name, c.Name, c.Image, image)
		}
	}
}
