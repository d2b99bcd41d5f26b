package testbed

import (
	"net/netip"
	"testing"
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
	for _, pl := range planes(bed, dualStackRemaps) {
		t.Run(pl.name+": a pod on the node without the gateway", func(t *testing.T) {
			checkFarPod(t, bed, pl)
		})
	}
	waitConnected(t, bed.A)
	waitConnected(t, bed.B)
}
