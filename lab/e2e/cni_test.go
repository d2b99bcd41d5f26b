package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/peerlink/peerlink/internal/kube"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
)

// TestCNIMatrix peers two clusters of two nodes each, with nodes filtering
// reverse paths strictly, for every pod network, layout of pod ranges and
// mode of kube-proxy, and checks traffic both ways between every pair of a
// pod on the gateway's node and a pod on the other node: each request
// reaches the very pod it was sent to, at the address the caller's cluster
// knows it by, and that pod sees the caller's own address in its cluster's
// view of the caller's cluster: remapped where the ranges collide, the real
// one where they are disjoint and inside the address plan for peers both
// clusters declare. In the cells of identical ranges it also checks what
// the nodes themselves send, and a Service by its clusterset IP
// (checkNodesReach). kube-proxy's nftables and IPVS modes run with identical
// ranges on both pod networks; IPVS only where the kernel has it.
func TestCNIMatrix(t *testing.T) {
	sideBySide(t)
	start := time.Now()
	// The cells run side by side, after this function returns.
	t.Cleanup(func() { t.Logf("TestCNIMatrix took %.1fs", time.Since(start).Seconds()) })
	type layout struct {
		name string
		pods []netip.Prefix
		// remapped says whether each side reaches the other's pods at
		// another range than their own.
		remapped bool
		// plan is the address plan for peers both controllers get
		// (ROUTED_PEER_CIDRS); none remaps every peer range.
		plan []netip.Prefix
	}
	identical := layout{"identical", prefixes("10.244.0.0/16"), true, nil}
	disjoint := layout{"disjoint", prefixes("10.244.0.0/16", "10.245.0.0/16"), false, prefixes("10.244.0.0/15")}
	// One cluster's range holds only half of the other's.
	partial := layout{"partial", prefixes("10.244.0.0/16", "10.244.128.0/17"), true, prefixes("10.244.0.0/15")}
	cells := []struct {
		layout layout
		cni    cluster.CNI
		proxy  cluster.ProxyMode
	}{
		{identical, cluster.Bridge, cluster.IPTables},
		{identical, cluster.Flannel, cluster.IPTables},
		{disjoint, cluster.Bridge, cluster.IPTables},
		{disjoint, cluster.Flannel, cluster.IPTables},
		{partial, cluster.Bridge, cluster.IPTables},
		{identical, cluster.Bridge, cluster.NFTables},
		{identical, cluster.Flannel, cluster.NFTables},
		{identical, cluster.Bridge, cluster.IPVS},
		{identical, cluster.Flannel, cluster.IPVS},
	}
	for _, c := range cells {
		name := string(c.cni) + "/" + c.layout.name
		if c.proxy != cluster.IPTables {
			name += "/" + string(c.proxy)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if err := c.proxy.CheckKernel(); err != nil {
				t.Skip(err)
			}
			began := time.Now()
			ctx, l := newPeeredLabWith(t, 10*time.Minute, labctl.Options{
				Names: []string{"mx-a", "mx-b"}, Nodes: 2, CNI: c.cni, ProxyMode: c.proxy, PodCIDRs: c.layout.pods,
				RoutedPeerCIDRs: c.layout.plan,
			})
			a, b := l.Clusters[0], l.Clusters[1]
			checkProxyMode(t, l, c.proxy)
			for _, pair := range [][2]*cluster.Cluster{{a, b}, {b, a}} {
				real, remapped, err := l.PodCIDRView(ctx, pair[0], pair[1])
				if err != nil {
					t.Fatal(err)
				}
				if c.layout.remapped == (real == remapped) {
					t.Errorf("%s sees the pods of %s (%s) at %s: remapped %v, want %v", pair[0].ClusterID, pair[1].ClusterID, real, remapped, real != remapped, c.layout.remapped)
				}
			}
			placed := map[*cluster.Cluster][]corev1.Pod{a: placedPods(t, ctx, l, a), b: placedPods(t, ctx, l, b)}
			for _, from := range placed[a] {
				for _, to := range placed[b] {
					checkTraffic(t, ctx, l, a, from, b, to)
					checkTraffic(t, ctx, l, b, to, a, from)
				}
			}
			if c.layout.name == identical.name {
				checkNodesReach(t, ctx, l, placed)
			}
			t.Logf("%s: lab up, peered and checked in %.1fs", name, time.Since(began).Seconds())
		})
	}
}

// checkProxyMode fails the test unless kube-proxy programs every node of
// the lab in mode: its nftables table ip kube-proxy exists in nftables
// mode only.
func checkProxyMode(t *testing.T, l *labctl.Lab, mode cluster.ProxyMode) {
	t.Helper()
	for _, n := range l.Clusters {
		for _, node := range n.Nodes() {
			ns := nodeNS(t, node)
			tables := ns.MustRun(t, "nft", "list", "tables")
			if has := strings.Contains(tables, "table ip kube-proxy"); has != (mode == cluster.NFTables) {
				t.Fatalf("node %s, kube-proxy in %s mode: nftables table ip kube-proxy present %v; the node's tables:\n%s", node.Name(), mode, has, tables)
			}
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
		if !kube.PodReady(&gw) {
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
