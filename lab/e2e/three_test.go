package e2e

import (
	"net/netip"
	"testing"
	"time"
)

// TestThreeClusters peers a first cluster with two others, all three with
// the same pod range: the first must reach both peers, each at a remapped
// range of its own, and both must reach it.
func TestThreeClusters(t *testing.T) {
	sideBySide(t)
	ctx, l := newPeeredLab(t, 12*time.Minute, "tri-a", "tri-b", "tri-c")
	a, peers := l.Clusters[0], l.Clusters[1:]
	var ranges, views []netip.Prefix
	for _, peer := range peers {
		r, v, err := l.PodCIDRView(ctx, a, peer)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s sees the pods of %s at %s", a.ClusterID, peer.ClusterID, v)
		ranges, views = append(ranges, r), append(views, v)
	}
	if ranges[0] != ranges[1] {
		t.Fatalf("the peers should share one pod range: %s and %s", ranges[0], ranges[1])
	}
	if views[0].Overlaps(views[1]) {
		t.Errorf("%s sees %s at %s and %s at %s: the ranges overlap", a.ClusterID, peers[0].ClusterID, views[0], peers[1].ClusterID, views[1])
	}

	podsA := echoPods(t, ctx, l, a)
	for _, peer := range peers {
		podsP := echoPods(t, ctx, l, peer)
		// checkTraffic checks that the answer comes from that very pod of
		// that very cluster: the same address in the other peer would
		// answer with another pod name.
		checkTraffic(t, ctx, l, a, podsA[0], peer, podsP[0])
		checkTraffic(t, ctx, l, peer, podsP[1], a, podsA[1])
	}
}
