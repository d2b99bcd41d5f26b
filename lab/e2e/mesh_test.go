package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
)

// meshEnv set to 1 runs TestMesh, whose five clusters do not fit the time
// of make test: make test-mesh sets it.
const meshEnv = "PEERLINK_MESH"

// TestMesh peers five clusters of one pod range in a full mesh: ten
// peerings, each pair connected with `peerlink network connect` (the first
// of the pair the client), so every cluster is the client of some peers and
// the server of others. Every cluster must see each peer's pods at a range
// of its own, reach a pod of every peer and be reached by one, both ways,
// and call by its clusterset name the Service each peer exports, answered
// by that peer's pods. It logs the time of each connect and of the whole
// mesh.
func TestMesh(t *testing.T) {
	alone(t)
	if os.Getenv(meshEnv) != "1" {
		t.Skipf("five clusters take longer than make test allows: run with %s=1 (make test-mesh)", meshEnv)
	}
	ctx, l := newLabWith(t, 45*time.Minute, labctl.Options{Names: []string{"mesh-1", "mesh-2", "mesh-3", "mesh-4", "mesh-5"}})
	var pairs [][2]*cluster.Cluster
	for i, a := range l.Clusters {
		for _, b := range l.Clusters[i+1:] {
			pairs = append(pairs, [2]*cluster.Cluster{a, b})
		}
	}
	start := time.Now()
	for _, p := range pairs {
		began := time.Now()
		if out, err := l.Connect(ctx, p[0], p[1]); err != nil {
			t.Fatalf("connect %s to %s: %v\n%s", p[0].Name, p[1].Name, err, out)
		}
		t.Logf("%s (client) and %s (server): network connect returned in %.1fs", p[0].Name, p[1].Name, time.Since(began).Seconds())
	}
	for _, p := range pairs {
		waitConnected(t, ctx, l, p[0], p[1])
	}
	t.Logf("full mesh: %d peerings of %d clusters Connected %.1fs after the first connect", len(pairs), len(l.Clusters), time.Since(start).Seconds())

	for _, a := range l.Clusters {
		var peers []string
		var views []netip.Prefix
		for _, b := range l.Clusters {
			if a == b {
				continue
			}
			_, v, err := l.PodCIDRView(ctx, a, b)
			if err != nil {
				t.Fatal(err)
			}
			peers, views = append(peers, b.Name), append(views, v)
		}
		if i, j, ok := cidr.FirstOverlap(views); ok {
			t.Errorf("%s sees %s at %s and %s at %s: the ranges overlap", a.Name, peers[i], views[i], peers[j], views[j])
		}
		t.Logf("%s sees its peers' pods at %v", a.Name, views)
	}

	pods := map[*cluster.Cluster][]corev1.Pod{}
	for _, n := range l.Clusters {
		pods[n] = echoPods(t, ctx, l, n)
	}
	for _, p := range pairs {
		a, b := p[0], p[1]
		checkTraffic(t, ctx, l, a, pods[a][0], b, pods[b][0])
		checkTraffic(t, ctx, l, b, pods[b][1], a, pods[a][1])
	}

	// Each cluster exports a Service of its own name; every other calls it.
	for _, n := range l.Clusters {
		exportEcho(t, ctx, l, n)
	}
	for _, a := range l.Clusters {
		for _, b := range l.Clusters {
			if a != b {
				callExportedEcho(t, ctx, l, a, pods[a][0], b)
			}
		}
	}

	// The cost of a peering where it is easy to read: each gateway's
	// resident memory, one gateway per peer on every cluster.
	for _, n := range l.Clusters {
		var mem []string
		for _, peer := range l.Clusters {
			if n != peer {
				m := gatewayMetrics(t, ctx, l, n, peer.ClusterID)[residentMemory]
				mem = append(mem, fmt.Sprintf("%s %.0f MiB", peer.Name, m/(1<<20)))
			}
		}
		t.Logf("%s: resident memory of its gateway for each peer: %s", n.Name, strings.Join(mem, ", "))
	}
}

// exportEcho exports from n the Service echo-<n's name> of the lab's echo
// pods (labctl.ExportEcho).
func exportEcho(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster) {
	t.Helper()
	if err := l.ExportEcho(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// callExportedEcho calls from pod of a, by its clusterset name, the
// Service b exports with exportEcho, until one of b's pods answers.
func callExportedEcho(t *testing.T, ctx context.Context, l *labctl.Lab, a *cluster.Cluster, pod corev1.Pod, b *cluster.Cluster) {
	t.Helper()
	answer, err := l.CallExportedEcho(ctx, a, pod, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(answer)
}

// callEcho calls url from pod of a until one of b's pods (bPods) answers.
func callEcho(t *testing.T, ctx context.Context, l *labctl.Lab, a *cluster.Cluster, pod corev1.Pod, b *cluster.Cluster, bPods []corev1.Pod, url string) {
	t.Helper()
	eventually(t, ctx, a.Name+" calls "+url, func() error {
		got, err := l.EchoGet(ctx, a, pod.Name, url)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(bPods, func(p corev1.Pod) bool { return p.Name == got.Reply.Pod }) {
			return fmt.Errorf("answered by %s, not an echo pod of %s", got.Reply.Pod, b.Name)
		}
		t.Logf("%s -> %s: answered by %s, caller seen as %s", a.Name, url, got.Reply.Pod, got.Reply.Client)
		return nil
	})
}
