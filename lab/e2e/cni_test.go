package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
)

// TestCNIMatrix peers two clusters of two nodes each, with nodes filtering
// reverse paths strictly, for every pod network and layout of pod ranges,
// and checks traffic both ways between every pair of a pod on the gateway's
// node and a pod on the other node: each request reaches the very pod it
// was sent to, at the address the caller's cluster knows it by, and that pod
// sees the caller's own address in its cluster's view of the caller's
// cluster: remapped where the ranges collide, the real one where they are
// disjoint and inside the address plan for peers both clusters declare.
func TestCNIMatrix(t *testing.T) {
	layouts := []struct {
		name string
		pods []netip.Prefix
		// remapped says whether each side reaches the other's pods at
		// another range than their own.
		remapped bool
		// cnis are the pod networks the layout runs with.
		cnis []cluster.CNI
		// plan is the address plan for peers both controllers get
		// (ROUTED_PEER_CIDRS); none remaps every peer range.
		plan []netip.Prefix
	}{
		{"identical", prefixes("10.244.0.0/16"), true, []cluster.CNI{cluster.Bridge, cluster.Flannel}, nil},
		{"disjoint", prefixes("10.244.0.0/16", "10.245.0.0/16"), false, []cluster.CNI{cluster.Bridge, cluster.Flannel}, prefixes("10.244.0.0/15")},
		// One cluster's range holds only half of the other's.
		{"partial", prefixes("10.244.0.0/16", "10.244.128.0/17"), true, []cluster.CNI{cluster.Bridge}, prefixes("10.244.0.0/15")},
	}
	for _, layout := range layouts {
		for _, cni := range layout.cnis {
			t.Run(string(cni)+"/"+layout.name, func(t *testing.T) {
				ctx, l := newPeeredLabWith(t, 10*time.Minute, labctl.Options{
					Names: []string{"mx-a", "mx-b"}, Nodes: 2, CNI: cni, PodCIDRs: layout.pods,
					RoutedPeerCIDRs: layout.plan,
				})
				a, b := l.Clusters[0], l.Clusters[1]
				for _, pair := range [][2]*cluster.Cluster{{a, b}, {b, a}} {
					real, remapped, err := l.PodCIDRView(ctx, pair[0], pair[1])
					if err != nil {
						t.Fatal(err)
					}
					if layout.remapped == (real == remapped) {
						t.Errorf("%s sees the pods of %s (%s) at %s: remapped %v, want %v", pair[0].ClusterID, pair[1].ClusterID, real, remapped, real != remapped, layout.remapped)
					}
				}
				podsA, podsB := placedPods(t, ctx, l, a), placedPods(t, ctx, l, b)
				for _, from := range podsA {
					for _, to := range podsB {
						checkTraffic(t, ctx, l, a, from, b, to)
						checkTraffic(t, ctx, l, b, to, a, from)
					}
				}
			})
		}
	}
}

// placedPods starts two echo pods in cluster n, one on the node of its
// gateway pod and one on another node, and returns them in that order once
// they run: traffic of the first meets the gateway on its node, traffic of
// the second crosses the overlay between nodes.
func placedPods(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster) []corev1.Pod {
	t.Helper()
	// The gateway's pod can still be replaced once Connected (a rollout
	// of its Deployment): wait for one that is ready.
	var gw corev1.Pod
	eventually(t, ctx, n.ClusterID+": a ready gateway pod", func() error {
		var err error
		if gw, err = gatewayPod(ctx, n); err != nil {
			return err
		}
		if !podReady(&gw) {
			return fmt.Errorf("gateway pod %s not ready", gw.Name)
		}
		return nil
	})
	other := ""
	for _, node := range n.Nodes() {
		if node.Name() != gw.Spec.NodeName {
			other = node.Name()
			break
		}
	}
	if other == "" {
		t.Fatalf("cluster %s: no node besides the gateway's %s", n.ClusterID, gw.Spec.NodeName)
	}
	var pods []corev1.Pod
	for _, place := range []struct{ name, node string }{{"on-gateway-node", gw.Spec.NodeName}, {"on-other-node", other}} {
		pod := startEchoPod(t, ctx, l, n, place.name, place.node)
		t.Logf("%s: pod %s on node %s at %s", n.ClusterID, pod.Name, pod.Spec.NodeName, pod.Status.PodIP)
		pods = append(pods, *pod)
	}
	return pods
}

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, p := range s {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}
