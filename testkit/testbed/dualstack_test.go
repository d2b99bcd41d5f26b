package testbed

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/peerlink/peerlink/dataplane"
)

// dualStackRemaps are differentRemaps with dual-stack sides: each sees the
// other's IPv6 pod range, the same fd44::/48 on both, in a range of its own.
var dualStackRemaps = Remaps{
	AOfB: differentRemaps.AOfB, BOfA: differentRemaps.BOfA,
	AOfB6: netip.MustParsePrefix("fd00:71::/48"), BOfA6: netip.MustParsePrefix("fd00:73::/48"),
}

// TestPeeringDualStack peers two dual-stack sides over an IPv4 underlay:
// IPv6 pod traffic crosses the same overlay and tunnel as IPv4, remapped by
// the gateways' ip6 tables.
func TestPeeringDualStack(t *testing.T) {
	bed := up(t, dualStackRemaps)
	checkBothWays(t, bed, dualStackRemaps)
	waitConnected(t, bed.A)
	waitConnected(t, bed.B)
	ctx := context.Background()
	v6 := planes(bed, dualStackRemaps)[1]
	a1 := bed.A.Side.Pods[0]
	bFromA := seen(t, v6.pods[1], v6.aOfB)

	for _, pl := range planes(bed, dualStackRemaps) {
		t.Run(pl.name+": a pod on the node without the gateway", func(t *testing.T) {
			// The Nodes give the second node's pod ranges: the answers
			// the gateway returns to its node go on to the second node
			// through the overlay, in IPv6 too.
			far, fam := netip.PrefixFrom(pl.far, 24), "-4"
			if pl.far.Is6() {
				far, fam = netip.PrefixFrom(pl.far, 64), "-6"
			}
			routes := bed.A.Side.Node.MustRun(t, "ip", "-o", fam, "route", "show", "table", "all")
			if !slices.ContainsFunc(strings.Split(routes, "\n"), func(l string) bool {
				return strings.HasPrefix(l, far.Masked().String()+" ") && strings.Contains(l, "dst "+Node2IP.String()) && strings.Contains(l, "dev "+dataplane.OverlayLink)
			}) {
				t.Errorf("A's node has no route of %s to the second node through the overlay:\n%s", far.Masked(), routes)
			}
			checkFarPod(t, bed, pl)
		})
	}

	t.Run("each side shows how the peer reaches both its ranges", func(t *testing.T) {
		waitPeerView(t, bed.A, bed.B)
		waitPeerView(t, bed.B, bed.A)
	})

	t.Run("IPv6: a bulk transfer through the tunnel's MTU", func(t *testing.T) {
		// The pods' links have an MTU of 1500, the tunnel 1340: full-size
		// segments cross only once the gateway clamped the MSS to the
		// IPv6 headers' share of the tunnel's MTU.
		run, err := Iperf(ctx, bed.B.Side.Pods[1], a1, bFromA, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if run.Bytes < 1e6 {
			t.Errorf("%.0f bytes crossed in 2 s", run.Bytes)
		}
		t.Logf("IPv6 from A's pod to B's pod: %.0f Mbit/s", run.BitsPerSecond/1e6)
		// 1340 less the 60 bytes of IPv6 and TCP headers (IPv4: 40).
		for _, r := range []*Running{bed.A, bed.B} {
			if out := r.Side.Gateway.MustRun(t, "nft", "list", "table", "ip6", dataplane.GatewayNFTable); !strings.Contains(out, "tcp option maxseg size set 1280") {
				t.Errorf("side %s: the ip6 table clamps no MSS to 1280:\n%s", r.Side.Name, out)
			}
		}
	})

	t.Run("IPv6: path MTU discovery through the NAT", func(t *testing.T) {
		// Routers do not fragment IPv6: a pod's packet larger than the
		// tunnel is answered by the gateway's Packet Too Big, which must
		// reach the pod through the translation so that it sends smaller
		// ones. B's first pod has had no large packet yet. Its first
		// answer meets the same fate on B's side, so one more is lost.
		dst := seen(t, v6.pods[0], v6.aOfB)
		out, _ := a1.Run("ping", "-c", "4", "-i", "0.3", "-W", "1", "-s", "1400", "-M", "want", "-n", dst.String())
		if !strings.Contains(out, "Packet too big: mtu=1340") || !strings.Contains(out, "1408 bytes from "+dst.String()) {
			t.Errorf("1400-byte pings of %s: want a Packet Too Big of MTU 1340, then answers:\n%s", dst, out)
		}
	})

	t.Run("IPv6: no active gateway pod: the peer's range is dropped, then unreachable", func(t *testing.T) {
		setActive(t, bed.A, "false")
		checkWithoutGateway(t, bed.A.Side.Node, a1, v6.aOfB, bFromA)
		setActive(t, bed.A, "true")
		if _, err := WaitPing(ctx, a1, bFromA, 30*time.Second); err != nil {
			t.Fatalf("the peer once its gateway pod is active again: %v", err)
		}
	})

	t.Run("ip6 table flushed", func(t *testing.T) {
		bed.A.Side.Gateway.MustRun(t, "nft", "flush", "table", "ip6", dataplane.GatewayNFTable)
		took, err := WaitPing(ctx, a1, bFromA, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("IPv6 traffic restored %v after the client's ip6 table was flushed (goal %v)", took.Round(time.Millisecond), restoreGoal)
		if took > restoreGoal {
			t.Errorf("restored after %v, goal %v", took, restoreGoal)
		}
		if out := bed.A.Side.Gateway.MustRun(t, "nft", "list", "table", "ip6", dataplane.GatewayNFTable); !strings.Contains(out, "dnat ip6 prefix to ip6 daddr map @remapped_to_real") {
			t.Errorf("table after repair:\n%s", out)
		}
		checkBothWays(t, bed, dualStackRemaps)
	})

	t.Run("IPv6: gateway killed and restarted", func(t *testing.T) {
		checkGatewayRestart(t, bed, dualStackRemaps, bFromA)
	})

	t.Run("IPv6: a fabric restart drops nothing", func(t *testing.T) {
		checkFabricRestart(t, bed, bFromA)
	})

	t.Run("graceful stop leaves the fabric's state of both families; removal on uninstall", func(t *testing.T) {
		stopAndUninstall(t, bed, dualStackRemaps)
	})
}

// TestPeeringIPv6Endpoint is TestPeeringDualStack with the gateways joined
// by an IPv6-only internet link: WireGuard's own packets are IPv6, whatever
// the family of the traffic they carry.
func TestPeeringIPv6Endpoint(t *testing.T) {
	bed := up(t, dualStackRemaps, IPv6Endpoint())
	checkBothWays(t, bed, dualStackRemaps)
	waitConnected(t, bed.A)
	waitConnected(t, bed.B)
}
