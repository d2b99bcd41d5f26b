package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
)

// TestOneCommand is the path of an admin holding both kubeconfigs: connect,
// traffic both ways with each side seeing the other under its remapped
// addresses, disconnect (traffic stops, Configurations stay), reset
// (nothing of the peering is left).
func TestOneCommand(t *testing.T) {
	ctx, l := newPeeredLab(t, 10*time.Minute, "one-a", "one-b")
	a, b := l.Clusters[0], l.Clusters[1]
	podsA, podsB := checkPeered(t, ctx, l, a, b)
	checkVersions(t, ctx, l, a)

	// Both clusters use one pod range, so a pod of one has, sooner or
	// later, the address of the other's gateway pod: traffic must flow
	// both ways for it too. A new gateway pod of b gets an address a hands
	// out soon.
	old, err := gatewayPod(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := deleteGatewayPods(l, b)(ctx); err != nil {
		t.Fatal(err)
	}
	var gw corev1.Pod
	eventually(t, ctx, "a new gateway pod in "+b.ClusterID, func() error {
		var err error
		if gw, err = gatewayPod(ctx, b); err != nil {
			return err
		}
		if gw.Name == old.Name || !podReady(&gw) {
			return fmt.Errorf("%s not ready yet", gw.Name)
		}
		return nil
	})
	waitConnected(t, ctx, l, a, b)
	twin := echoPodWithIP(t, ctx, l, a, gw.Status.PodIP)
	t.Logf("%s pod %s has the address of the gateway pod %s of %s", a.ClusterID, twin.Name, gw.Name, b.ClusterID)
	checkTraffic(t, ctx, l, a, twin, b, podsB[0])
	checkTraffic(t, ctx, l, b, podsB[0], a, twin)

	peerlink(t, ctx, l, "network", "disconnect", "--skip-confirm", "--kubeconfig", a.Kubeconfig(), "--remote-kubeconfig", b.Kubeconfig())
	eventually(t, ctx, "traffic stops after disconnect", func() error {
		if got, err := l.Reach(ctx, a, podsA[0], b, podsB[0]); err == nil {
			return fmt.Errorf("%s still reaches %s: %+v", a.ClusterID, b.ClusterID, got)
		}
		return nil
	})
	for _, side := range [][2]*cluster.Cluster{{a, b}, {b, a}} {
		if _, _, err := l.PodCIDRView(ctx, side[0], side[1]); err != nil {
			t.Errorf("after disconnect the Configurations should stay: %v", err)
		}
		// The gateways' children go by garbage collection, just after.
		eventually(t, ctx, "cluster "+side[0].ClusterID+" has no gateway after disconnect", func() error {
			if left := peeringObjects(t, ctx, l, side[0], side[1], gatewayKinds()); len(left) > 0 {
				return fmt.Errorf("left: %v", left)
			}
			return nil
		})
	}

	peerlink(t, ctx, l, "network", "reset", "--skip-confirm", "--kubeconfig", a.Kubeconfig(), "--remote-kubeconfig", b.Kubeconfig())
	for _, side := range [][2]*cluster.Cluster{{a, b}, {b, a}} {
		eventually(t, ctx, "cluster "+side[0].ClusterID+" has nothing of the peering after reset", func() error {
			if left := peeringObjects(t, ctx, l, side[0], side[1], append(gatewayKinds(), "configurations")); len(left) > 0 {
				return fmt.Errorf("left: %v", left)
			}
			return nil
		})
	}
}

// gatewayPod returns the gateway pod of cluster n that has an address and
// is not being deleted.
func gatewayPod(ctx context.Context, n *cluster.Cluster) (corev1.Pod, error) {
	cs, err := n.Clientset()
	if err != nil {
		return corev1.Pod{}, err
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: netv1beta1.ActiveGatewayLabel})
	if err != nil {
		return corev1.Pod{}, err
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			live = append(live, p)
		}
	}
	if len(live) != 1 {
		return corev1.Pod{}, fmt.Errorf("cluster %s: want one gateway pod with an address, got %d", n.ClusterID, len(live))
	}
	return live[0], nil
}

// echoPodWithIP starts echo pods in cluster n until one gets the address
// ip (the bridge plugin hands addresses out in turn), deletes the others,
// and returns that one.
func echoPodWithIP(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, ip string) corev1.Pod {
	t.Helper()
	cs, err := n.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	const tries = 20
	for i := range tries {
		name := fmt.Sprintf("twin-%d", i)
		pod := startEchoPod(t, ctx, l, n, name, "")
		if pod.Status.PodIP == ip {
			return *pod
		}
		if err := cs.CoreV1().Pods(labctl.EchoNamespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("cluster %s: no pod got address %s in %d tries", n.ClusterID, ip, tries)
	return corev1.Pod{}
}

// startEchoPod starts the echo pod name in cluster n, on node (any node
// when empty), and waits until it is ready with an address.
func startEchoPod(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, name, node string) *corev1.Pod {
	t.Helper()
	cs, err := n.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.StartEcho(ctx, n, name, node); err != nil {
		t.Fatal(err)
	}
	what := fmt.Sprintf("%s: pod %s running", n.ClusterID, name)
	if node != "" {
		what += " on " + node
	}
	var pod *corev1.Pod
	eventually(t, ctx, what, func() error {
		pod, err = cs.CoreV1().Pods(labctl.EchoNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.Status.PodIP == "" || !podReady(pod) {
			return fmt.Errorf("not ready yet")
		}
		return nil
	})
	return pod
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// peerlink runs the CLI and fails the test when it fails.
func peerlink(t *testing.T, ctx context.Context, l *labctl.Lab, args ...string) []byte {
	t.Helper()
	out, err := l.Peerlink(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitConnected waits until both sides report Connected and logs how long
// that took.
func waitConnected(t *testing.T, ctx context.Context, l *labctl.Lab, a, b *cluster.Cluster) {
	t.Helper()
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := l.WaitConnected(wctx, a, b); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s and %s Connected after %.1fs of waiting", a.ClusterID, b.ClusterID, time.Since(start).Seconds())
}

// checkPeered waits until a and b are Connected and checks traffic both
// ways between their echo pods, which it returns.
func checkPeered(t *testing.T, ctx context.Context, l *labctl.Lab, a, b *cluster.Cluster) (podsA, podsB []corev1.Pod) {
	t.Helper()
	waitConnected(t, ctx, l, a, b)
	podsA, podsB = echoPods(t, ctx, l, a), echoPods(t, ctx, l, b)
	checkTraffic(t, ctx, l, a, podsA[0], b, podsB[1])
	checkTraffic(t, ctx, l, b, podsB[0], a, podsA[1])
	return podsA, podsB
}

// checkTraffic sends a request from pod from of cluster src to pod to of
// cluster dst at the address src knows it by, and checks both ends: the
// request reached that very pod, and the pod saw the caller's own address
// remapped into dst's view of src (no masquerading on the way).
func checkTraffic(t *testing.T, ctx context.Context, l *labctl.Lab, src *cluster.Cluster, from corev1.Pod, dst *cluster.Cluster, to corev1.Pod) {
	t.Helper()
	wantClient, err := l.RemappedIP(ctx, dst, src, from.Status.PodIP)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, fmt.Sprintf("%s/%s reaches %s/%s", src.ClusterID, from.Name, dst.ClusterID, to.Name), func() error {
		got, err := l.Reach(ctx, src, from, dst, to)
		if err != nil {
			return err
		}
		if got.Reply.PodIP != to.Status.PodIP || got.Reply.Pod != to.Name {
			return fmt.Errorf("answered by %s (%s), want %s (%s)", got.Reply.Pod, got.Reply.PodIP, to.Name, to.Status.PodIP)
		}
		host, _, err := net.SplitHostPort(got.Reply.Client)
		if err != nil {
			return err
		}
		if host != wantClient.String() {
			t.Errorf("%s saw the caller %s (%s) as %s, want %s", dst.ClusterID, from.Name, from.Status.PodIP, host, wantClient)
		}
		t.Logf("%s %s -> %s: answered by %s (%s), caller seen as %s", src.ClusterID, from.Status.PodIP, got.URL,
			got.Reply.Pod, got.Reply.PodIP, got.Reply.Client)
		return nil
	})
}

// gatewayKinds are the kinds of the per-peer objects a gateway brings.
func gatewayKinds() []string {
	return []string{"gatewayservers", "gatewayclients", "wggatewayservers", "wggatewayclients",
		"connections", "publickeies", "deployments", "services", "secrets", "serviceaccounts"}
}

// peeringObjects lists the objects of the given kinds that cluster n holds
// for peer: labelled with the peer's cluster ID anywhere, or named gw-* in
// the peer's tenant namespace (children of gateways).
func peeringObjects(t *testing.T, ctx context.Context, l *labctl.Lab, n, peer *cluster.Cluster, kinds []string) []string {
	t.Helper()
	var left []string
	tenant := netv1beta1.TenantNamespacePrefix + peer.ClusterID
	for _, kind := range kinds {
		out, err := l.Kubectl(ctx, n, "get", kind, "-A", "-l", netv1beta1.RemoteClusterIDLabel+"="+peer.ClusterID, "-o", "name")
		if err != nil {
			t.Fatal(err)
		}
		left = append(left, strings.Fields(string(out))...)
		out, err = l.Kubectl(ctx, n, "get", kind, "-n", tenant, "-o", "name", "--ignore-not-found")
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range strings.Fields(string(out)) {
			if _, obj, _ := strings.Cut(name, "/"); strings.HasPrefix(obj, netv1beta1.GatewayObjectPrefix) {
				left = append(left, tenant+"/"+name)
			}
		}
	}
	return left
}

// checkVersions checks that the controller of cluster n publishes the
// version of the lab's CLI, both built from this tree, so that the CLI
// warns of no difference.
func checkVersions(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster) {
	t.Helper()
	cmd := exec.CommandContext(ctx, l.PeerlinkBin(), "version", "--kubeconfig", n.Kubeconfig(), "-o", "json")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("peerlink version: %v: %s", err, stderr.String())
	}
	var v struct {
		Client     struct{ Version, Commit string } `json:"clientVersion"`
		Controller *struct{ Version string }        `json:"controllerVersion"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("peerlink version -o json: %v\n%s", err, out)
	}
	if v.Client.Version == "" || v.Client.Commit == "" || v.Controller == nil || v.Controller.Version != v.Client.Version {
		t.Errorf("cluster %s: peerlink version printed\n%s\nwant the CLI's version and commit, and the same controller version", n.ClusterID, out)
	}
	if stderr.Len() > 0 {
		t.Errorf("cluster %s: peerlink version warned: %s", n.ClusterID, stderr.String())
	}
}
