package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
)

// Path MTU figures of TestPathMTU.
const (
	// narrowMTU is what the path between the clusters carries once
	// narrowed, below the 1400 bytes WireGuard makes of a packet of the
	// tunnel's default MTU (1340).
	narrowMTU = 1300
	// wireGuardOverhead is what WireGuard adds to a packet it carries
	// over IPv4: IPv4, UDP, its own header and the authentication tag.
	wireGuardOverhead = 20 + 8 + 16 + 16
	// pathMTUWithin is the longest the Connections may take to report a
	// narrowed path.
	pathMTUWithin = 10 * time.Second
	// transferSize is what each TCP transfer across the narrowed path
	// carries.
	transferSize = 10 << 20
)

// TestPathMTU narrows the path between two peered clusters below what the
// tunnel's configured MTU needs, as a smaller link behind a firewall that
// filters ICMP does: packets too large for it vanish. Both Connections must
// report the path MTU it leaves (WireGuard's overhead and padding less)
// with their PathMTUReduced condition within pathMTUWithin, the CLI must
// show it, and TCP transfers of 10 MB must still complete both ways, the
// gateways clamping TCP to the path.
func TestPathMTU(t *testing.T) {
	sideBySide(t)
	ctx, l := newPeeredLab(t, 15*time.Minute, "pmtu-a", "pmtu-b")
	a, b := l.Clusters[0], l.Clusters[1]
	sides := [][2]*cluster.Cluster{{a, b}, {b, a}}

	// The full path carries the configured MTU.
	for _, s := range sides {
		eventually(t, ctx, s[0].ClusterID+" measures the configured MTU", func() error {
			return checkPathMTU(ctx, l, s[0], s[1], func(pathMTU int32, reduced bool) bool {
				return pathMTU == netv1beta1.DefaultMTU && !reduced
			})
		})
	}

	narrowed := time.Now()
	for _, n := range []*cluster.Cluster{a, b} {
		if err := n.NarrowPath(narrowMTU); err != nil {
			t.Fatal(err)
		}
	}
	// WireGuard pads what it carries to 16 bytes: the largest packet that
	// fits is a multiple of 16 at most narrowMTU less its overhead.
	want := int32((narrowMTU - wireGuardOverhead) / 16 * 16)
	for _, s := range sides {
		waitFor(t, ctx, pathMTUWithin-time.Since(narrowed), s[0].ClusterID+" measures the narrowed path", func() error {
			return checkPathMTU(ctx, l, s[0], s[1], func(pathMTU int32, reduced bool) bool {
				return pathMTU == want && reduced
			})
		})
	}
	t.Logf("both Connections report a path MTU of %d %.1fs after the path was narrowed to %d", want, time.Since(narrowed).Seconds(), narrowMTU)

	out, err := l.Peerlink(ctx, "info", "peer", b.ClusterID, "--kubeconfig", a.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	if line := fmt.Sprintf("%d (below the configured MTU %d", want, netv1beta1.DefaultMTU); !strings.Contains(string(out), line) {
		t.Errorf("peerlink info peer does not show the path MTU (%q):\n%s", line, out)
	}

	for _, s := range sides {
		src, dst := s[0], s[1]
		from, to := echoPods(t, ctx, l, src)[0], echoPods(t, ctx, l, dst)[0]
		ip, err := l.RemappedIP(ctx, src, dst, to.Status.PodIP)
		if err != nil {
			t.Fatal(err)
		}
		m, err := l.Transfer(ctx, src, from.Name, fmt.Sprintf("%s:%d", ip, labctl.EchoSinkPort), transferSize)
		if err != nil {
			t.Fatalf("TCP transfer of %d bytes from %s to %s across the narrowed path: %v", transferSize, src.ClusterID, dst.ClusterID, err)
		}
		t.Logf("%s -> %s: %d bytes in %.2fs across the narrowed path", src.ClusterID, dst.ClusterID, m.Bytes, m.Seconds)
	}
}

// checkPathMTU checks the path MTU the Connection of n towards peer
// reports, and its PathMTUReduced condition, with ok.
func checkPathMTU(ctx context.Context, l *labctl.Lab, n, peer *cluster.Cluster, ok func(pathMTU int32, reduced bool) bool) error {
	conn, err := l.Connection(ctx, n, peer)
	if err != nil {
		return err
	}
	if conn == nil {
		return fmt.Errorf("no Connection towards %s", peer.ClusterID)
	}
	reduced := meta.IsStatusConditionTrue(conn.Status.Conditions, netv1beta1.ConditionPathMTUReduced)
	if !ok(conn.Status.PathMTU, reduced) {
		return fmt.Errorf("Connection %s: path MTU %d, PathMTUReduced %v", conn.Name, conn.Status.PathMTU, reduced)
	}
	return nil
}
