package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/kube"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
	"github.com/peerlink/peerlink/templates"
)

// Figures of TestGatewayHA.
const (
	// haProbeInterval is the pace of the HTTP requests that measure the
	// outages.
	haProbeInterval = 50 * time.Millisecond
	// haTrials is the number of active gateway pods deleted on each side.
	haTrials = 5
	// haStoppedTrials is that number with the controller stopped.
	haStoppedTrials = 3
	// maxNodeFailover bounds the outage when the active pod's node fails.
	maxNodeFailover = 10 * time.Second
	// haWatch is how long traffic is watched after a fault.
	haWatch = 6 * time.Second
	// nodeWatch is how long traffic is watched after a node fails.
	nodeWatch = 20 * time.Second
)

// TestGatewayHA peers two clusters of two nodes with two gateway replicas
// on each side, which stand on different nodes, one of them active. While
// a pod of the client's cluster sends an HTTP request every 50 ms to a pod
// of the server's, the active gateway pod of each side is deleted five
// times: each outage must stay under the Lease's duration, the proof
// that the standby took the Lease the deleted pod released and did not
// wait for it to expire (the time a failover takes is a figure of make
// bench, measured side by side there: a timed bound here would fail on a
// busy machine).
// Then the controllers of both clusters stop, and the same deletions must
// stay under the same bound: a failover needs no controller. Then the node
// of the client's active pod fails (kubelet and network gone), the
// controllers still stopped: the standby must take over within
// maxNodeFailover. Last, the controllers start again and publish the pod
// that took over. Between the first deletions and the controllers'
// stop, each side's gateway Deployment is rolled out (rollOut).
func TestGatewayHA(t *testing.T) {
	alone(t)
	ctx, l := newLabWith(t, 25*time.Minute, labctl.Options{Names: []string{"ha-a", "ha-b"}, Nodes: 2})
	a, b := l.Clusters[0], l.Clusters[1]
	if out, err := l.Connect(ctx, a, b, "--gw-server-replicas=2", "--gw-client-replicas=2"); err != nil {
		t.Fatalf("connect: %v\n%s", err, out)
	}
	waitConnected(t, ctx, l, a, b)
	for _, n := range []*cluster.Cluster{a, b} {
		waitReplicas(t, ctx, n)
	}

	// The probe runs on the control-plane node, which stays up.
	const probe = "ha-probe"
	startProbe(t, ctx, l, a, b, probe, haProbeInterval, labctl.ProbeTimeout, 10*time.Minute)

	deleteActive(t, ctx, l, probe, a, b, "", haTrials)
	rollOut(t, ctx, l, probe, a, b)

	// Without the controller: the replicas' Lease, their label and every
	// node's fabric do the failover alone, as fast.
	for _, n := range []*cluster.Cluster{a, b} {
		scaleController(t, ctx, l, n, 0)
	}
	deleteActive(t, ctx, l, probe, a, b, ", the controller stopped", haStoppedTrials)

	// The node that fails must not be the control plane's: move the
	// client's active replica to the other node first.
	active, _ := waitReplicas(t, ctx, a)
	if active.Spec.NodeName == a.ControlPlane().Name() {
		if _, err := l.Kubectl(ctx, a, "-n", active.Namespace, "delete", "pod", active.Name, "--wait=false"); err != nil {
			t.Fatal(err)
		}
		eventually(t, ctx, "the active replica of "+a.ClusterID+" moves off the control-plane node", func() error {
			var err error
			active, err = activeReplica(ctx, a)
			if err != nil {
				return err
			}
			if active.Spec.NodeName == a.ControlPlane().Name() {
				return fmt.Errorf("active pod %s on %s", active.Name, active.Spec.NodeName)
			}
			return nil
		})
		waitReplicas(t, ctx, a)
	}
	var node *cluster.Node
	for _, nd := range a.Nodes() {
		if nd.Name() == active.Spec.NodeName {
			node = nd
		}
	}
	if node == nil {
		t.Fatalf("active pod %s runs on %q, not a node of %s", active.Name, active.Spec.NodeName, a.ClusterID)
	}
	// The controller is still stopped: the node's failure is met by the
	// standby and the fabric alone.
	gap := outage(t, ctx, l, a, probe, nodeWatch, node.Fail)
	if gap > maxNodeFailover {
		t.Errorf("node %s of the active gateway pod failed, the controller stopped: %.2fs without an answer, want at most %v", node.Name(), gap.Seconds(), maxNodeFailover)
		for _, n := range []*cluster.Cluster{a, b} {
			logGateways(t, ctx, l, n)
		}
	} else {
		t.Logf("node %s of the active gateway pod failed, the controller stopped: longest time without an answer %.2fs", node.Name(), gap.Seconds())
	}
	now, err := activeReplica(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if now.Spec.NodeName == node.Name() {
		t.Errorf("after node %s failed, the active gateway pod is still %s on it", node.Name(), now.Name)
	}

	// The controller, back, publishes the pod the fabric already follows;
	// the failed node, not yet NotReady to the API, must not get it.
	if out, err := l.Kubectl(ctx, a, "cordon", node.Name()); err != nil {
		t.Fatalf("cordon %s: %v\n%s", node.Name(), err, out)
	}
	for _, n := range []*cluster.Cluster{a, b} {
		scaleController(t, ctx, l, n, 1)
	}
	eventually(t, ctx, "the controller of "+a.ClusterID+" publishes the active pod "+now.Name, func() error {
		out, err := l.Kubectl(ctx, a, "-n", now.Namespace, "get", "gatewayclients", "-o", "jsonpath={.items[*].status.internalEndpoint.ip}")
		if err != nil {
			return err
		}
		if got := strings.TrimSpace(string(out)); got != now.Status.PodIP {
			return fmt.Errorf("status.internalEndpoint.ip %q, want %s", got, now.Status.PodIP)
		}
		return nil
	})
	waitAnswered(t, ctx, l, a, probe)
}

// deleteActive deletes the active gateway pod of the client's cluster a,
// then of the server's b, trials times each, while probe of a runs: each
// outage must stay under the Lease's duration. when says what else holds
// (", the controller stopped"), for the log.
func deleteActive(t *testing.T, ctx context.Context, l *labctl.Lab, probe string, a, b *cluster.Cluster, when string, trials int) {
	t.Helper()
	for _, side := range []struct {
		n    *cluster.Cluster
		role string
	}{{a, "client"}, {b, "server"}} {
		var outages []time.Duration
		for i := range trials {
			active, _ := waitReplicas(t, ctx, side.n)
			lease := leaseDuration(t, ctx, side.n, active)
			gap := outage(t, ctx, l, a, probe, haWatch, func() error {
				_, err := l.Kubectl(ctx, side.n, "-n", active.Namespace, "delete", "pod", active.Name, "--wait=false")
				return err
			})
			t.Logf("%s%s, trial %d: active gateway pod %s (node %s) deleted: longest time without an answer %.2fs",
				side.role, when, i+1, active.Name, active.Spec.NodeName, gap.Seconds())
			if gap >= lease {
				t.Errorf("%s%s, trial %d: %.2fs without an answer, not under the Lease's duration (%v): the standby did not take the Lease the deleted pod released",
					side.role, when, i+1, gap.Seconds(), lease)
				logGateways(t, ctx, l, side.n)
			}
			outages = append(outages, gap)
		}
		slices.Sort(outages)
		t.Logf("%s%s: median outage after deleting the active gateway pod: %.2fs (all: %v)", side.role, when, outages[len(outages)/2].Seconds(), outages)
	}
}

// rollOut restarts the gateway Deployment of the client's cluster a, then
// of the server's b, as an upgrade of peerlink does with a new image, while
// probe of a runs: the replicas must roll one at a time, a Ready pod left
// throughout, so the traffic misses at most one hand-over of the Lease,
// and must stay under the Lease's duration.
func rollOut(t *testing.T, ctx context.Context, l *labctl.Lab, probe string, a, b *cluster.Cluster) {
	t.Helper()
	for _, side := range []struct {
		n, peer *cluster.Cluster
		role    string
	}{{a, b, "client"}, {b, a, "server"}} {
		active, _ := waitReplicas(t, ctx, side.n)
		lease := leaseDuration(t, ctx, side.n, active)
		gw := gatewayDeployment(t, ctx, side.n, side.peer)
		waitAnswered(t, ctx, l, a, probe)
		fewest := watchReadyGateways(ctx, side.n)
		start := time.Now()
		for _, args := range [][]string{
			{"rollout", "restart", "deployment", gw.Name},
			{"rollout", "status", "deployment", gw.Name, "--timeout=3m"},
		} {
			if out, err := l.Kubectl(ctx, side.n, append([]string{"-n", gw.Namespace}, args...)...); err != nil {
				fewest()
				t.Fatalf("%s: kubectl %v: %v\n%s", side.n.ClusterID, args, err, out)
			}
		}
		rolled := time.Since(start)
		if least := fewest(); least < 1 {
			t.Errorf("%s: during the rollout the gateway had %d Ready pods: the replicas did not roll one at a time", side.role, least)
		}
		time.Sleep(haWatch)
		res, err := l.ProbeResults(ctx, a, probe)
		if err != nil {
			t.Fatal(err)
		}
		gap := labctl.LongestGap(res, start, time.Now())
		t.Logf("%s: gateway Deployment rolled out in %.1fs: longest time without an answer %.2fs", side.role, rolled.Seconds(), gap.Seconds())
		if gap >= lease {
			t.Errorf("%s: rolling the gateway's two replicas out cost %.2fs without an answer, not under the Lease's duration (%v): a new pod did not stand by before the active one went",
				side.role, gap.Seconds(), lease)
			logGateways(t, ctx, l, side.n)
		}
	}
}

// watchReadyGateways counts the Ready gateway pods of cluster n, not
// terminating, until the function it returns is called, which returns the
// fewest seen: a pod replaced before its successor stands by leaves none.
func watchReadyGateways(ctx context.Context, n *cluster.Cluster) (fewest func() int) {
	least := make(chan int, 1)
	sctx, stop := context.WithCancel(ctx)
	go func() {
		seen := -1
		for sctx.Err() == nil {
			if pods, err := gatewayPods(sctx, n); err == nil {
				ready := 0
				for _, p := range pods {
					if p.DeletionTimestamp == nil && kube.PodReady(&p) {
						ready++
					}
				}
				if seen < 0 || ready < seen {
					seen = ready
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		least <- seen
	}()
	return func() int {
		stop()
		return <-least
	}
}

// scaleController sets the replicas of peerlink's controller in cluster n
// and waits until that many of its pods run Ready, and no other.
func scaleController(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, replicas int) {
	t.Helper()
	if out, err := l.Kubectl(ctx, n, "-n", labctl.PeerlinkNamespace, "scale", "deployment/"+templates.ControllerDeployment, fmt.Sprintf("--replicas=%d", replicas)); err != nil {
		t.Fatalf("%s: scale the controller to %d: %v\n%s", n.ClusterID, replicas, err, out)
	}
	eventually(t, ctx, fmt.Sprintf("%s runs %d controller pods", n.ClusterID, replicas), func() error {
		cs, err := n.Clientset()
		if err != nil {
			return err
		}
		pods, err := cs.CoreV1().Pods(labctl.PeerlinkNamespace).List(ctx, metav1.ListOptions{LabelSelector: labctl.ControllerSelector})
		if err != nil {
			return err
		}
		ready := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && kube.PodReady(&p) {
				ready++
			}
		}
		if len(pods.Items) != replicas || ready != replicas {
			return fmt.Errorf("%d pods, %d Ready", len(pods.Items), ready)
		}
		return nil
	})
}

// outage waits until probe name of cluster n gets answers, does fault, and
// returns the longest time without an answer over the watch that follows.
func outage(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, name string, watch time.Duration, fault func() error) time.Duration {
	t.Helper()
	waitAnswered(t, ctx, l, n, name)
	start := time.Now()
	if err := fault(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(watch)
	res, err := l.ProbeResults(ctx, n, name)
	if err != nil {
		t.Fatal(err)
	}
	return labctl.LongestGap(res, start, start.Add(watch))
}

// logGateways logs what explains a failover of cluster n: its gateway
// pods, Leases and gateways, and what the gateway pods logged last (those
// of a failed node cannot tell).
func logGateways(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster) {
	t.Helper()
	for _, args := range [][]string{
		{"get", "pods,leases,gatewayservers,gatewayclients", "-A", "-o", "wide", "-l", "app.kubernetes.io/name=peerlink-gateway"},
		{"get", "leases,gatewayservers,gatewayclients", "-A", "-o", "wide"},
		{"get", "pods", "-A", "-o", "wide", "--show-labels"},
	} {
		out, err := l.Kubectl(ctx, n, args...)
		t.Logf("%s: kubectl %v (%v):\n%s", n.ClusterID, args, err, out)
	}
	pods, err := gatewayPods(ctx, n)
	if err != nil {
		t.Log(err)
		return
	}
	for _, p := range pods {
		out, err := l.Kubectl(ctx, n, "-n", p.Namespace, "logs", p.Name, "--tail=40")
		t.Logf("%s: logs of %s (%v):\n%s", n.ClusterID, p.Name, err, out)
		if len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount > 0 {
			out, err := l.Kubectl(ctx, n, "-n", p.Namespace, "logs", p.Name, "--previous", "--tail=20")
			t.Logf("%s: logs of %s before its last restart (%v):\n%s", n.ClusterID, p.Name, err, out)
		}
	}
}

// gatewayPods lists the gateway pods of cluster n.
func gatewayPods(ctx context.Context, n *cluster.Cluster) ([]corev1.Pod, error) {
	cs, err := n.Clientset()
	if err != nil {
		return nil, err
	}
	list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=peerlink-gateway"})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// activeReplica returns the one gateway pod of n labelled active.
func activeReplica(ctx context.Context, n *cluster.Cluster) (corev1.Pod, error) {
	pods, err := gatewayPods(ctx, n)
	if err != nil {
		return corev1.Pod{}, err
	}
	var active []corev1.Pod
	for _, p := range pods {
		if p.Labels[netv1beta1.ActiveGatewayLabel] == "true" && p.DeletionTimestamp == nil {
			active = append(active, p)
		}
	}
	if len(active) != 1 {
		return corev1.Pod{}, fmt.Errorf("%d active gateway pods, want one", len(active))
	}
	return active[0], nil
}

// waitReplicas waits until cluster n has two Ready gateway pods on two
// nodes, one of them active, and returns the active one and the standby.
// A standby on the active pod's node is deleted, to be made again on the
// other.
func waitReplicas(t *testing.T, ctx context.Context, n *cluster.Cluster) (active, standby corev1.Pod) {
	t.Helper()
	eventually(t, ctx, n.ClusterID+" has an active and a standby gateway pod, Ready, on two nodes", func() error {
		pods, err := gatewayPods(ctx, n)
		if err != nil {
			return err
		}
		var ready []corev1.Pod
		for _, p := range pods {
			if p.DeletionTimestamp == nil && kube.PodReady(&p) {
				ready = append(ready, p)
			}
		}
		if len(ready) != 2 {
			return fmt.Errorf("%d Ready gateway pods, want 2 on two nodes", len(ready))
		}
		if active, err = activeReplica(ctx, n); err != nil {
			return err
		}
		if ready[0].Spec.NodeName == ready[1].Spec.NodeName {
			// The anti-affinity is a preference: a replica made while the
			// one it replaces still terminates may land beside the other.
			// Make it again, now that the node is free.
			for _, p := range ready {
				if p.Name != active.Name {
					cs, err := n.Clientset()
					if err != nil {
						return err
					}
					if err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
						return err
					}
				}
			}
			return fmt.Errorf("both gateway pods on node %s: the standby is made again", ready[0].Spec.NodeName)
		}
		standby = ready[0]
		if standby.Name == active.Name {
			standby = ready[1]
		}
		return nil
	})
	return active, standby
}

// waitAnswered waits until the last request of probe name in cluster n was
// answered.
func waitAnswered(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, name string) {
	t.Helper()
	eventually(t, ctx, "probe "+name+" gets answers", func() error {
		res, err := l.ProbeResults(ctx, n, name)
		if err != nil {
			return err
		}
		if len(res) == 0 || !res[len(res)-1].OK {
			return fmt.Errorf("%d requests, the last unanswered", len(res))
		}
		return nil
	})
}

// leaseDuration returns the duration of the Lease the replicas of the
// gateway of pod p compete for.
func leaseDuration(t *testing.T, ctx context.Context, n *cluster.Cluster, p corev1.Pod) time.Duration {
	t.Helper()
	cs, err := n.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	name := netv1beta1.GatewayObjectPrefix + p.Labels[netv1beta1.GatewayNameLabel]
	lease, err := cs.CoordinationV1().Leases(p.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%s: Lease %s/%s: %v", n.ClusterID, p.Namespace, name, err)
	}
	if lease.Spec.LeaseDurationSeconds == nil {
		t.Fatalf("%s: Lease %s/%s has no duration", n.ClusterID, p.Namespace, name)
	}
	return time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
}
