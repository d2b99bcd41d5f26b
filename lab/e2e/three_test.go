package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/peerlink/peerlink/lab/internal/node"
)

// TestThreeClusters peers a first cluster with two others, all three with
// the same pod range: the first must reach both peers, each at a remapped
// range of its own, and both must reach it.
func TestThreeClusters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	l := newLab(t, ctx, "tri-a", "tri-b", "tri-c")
	a, b, c := l.Nodes[0], l.Nodes[1], l.Nodes[2]
	for _, peer := range []*node.Node{b, c} {
		if out, err := l.Connect(ctx, a, peer); err != nil {
			t.Fatalf("connect %s to %s: %v\n%s", a.ClusterID, peer.ClusterID, err, out)
		}
	}
	for _, peer := range []*node.Node{b, c} {
		waitConnected(t, ctx, l, a, peer)
	}

	realB, viewB, err := l.PodCIDRView(ctx, a, b)
	if err != nil {
		t.Fatal(err)
	}
	realC, viewC, err := l.PodCIDRView(ctx, a, c)
	if err != nil {
		t.Fatal(err)
	}
	if realB != realC {
		t.Fatalf("the peers should share one pod range: %s and %s", realB, realC)
	}
	if viewB.Overlaps(viewC) {
		t.Errorf("%s sees %s at %s and %s at %s: the ranges overlap", a.ClusterID, b.ClusterID, viewB, c.ClusterID, viewC)
	}
	t.Logf("%s sees the pods of %s at %s and those of %s at %s", a.ClusterID, b.ClusterID, viewB, c.ClusterID, viewC)

	podsA := echoPods(t, ctx, l, a)
	for _, peer := range []*node.Node{b, c} {
		podsP := echoPods(t, ctx, l, peer)
		// checkTraffic checks that the answer comes from that very pod of
		// that very cluster: the same address in the other peer would
		// answer with another pod name.
		checkTraffic(t, ctx, l, a, podsA[0], peer, podsP[0])
		checkTraffic(t, ctx, l, peer, podsP[1], a, podsA[1])
	}
}
