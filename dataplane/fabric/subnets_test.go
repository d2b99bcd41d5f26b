package fabric

import (
	"slices"
	"testing"

	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// TestNodeSubnets reads a node's networks from a real routing table: its
// on-link prefixes and routed destinations, not its default route, the
// overlay's routes, the cluster's own ranges, link-local space, routes of
// other tables or blackholes.
func TestNodeSubnets(t *testing.T) {
	node, _ := netns.Joined(t,
		netns.End{Prefix: "node", Link: "eth0", Addr: "172.20.3.7/20"},
		netns.End{Prefix: "router", Link: "eth0", Addr: "172.20.0.1/20"})
	for _, args := range [][]string{
		{"ip", "route", "add", "default", "via", "172.20.0.1"},
		// Peered networks through the subnet's router.
		{"ip", "route", "add", "192.168.40.0/22", "via", "172.20.0.1"},
		{"ip", "route", "add", "10.60.0.0/16", "via", "172.20.0.1"},
		// The cluster's own pod range (a CNI bridge) and a host route in it.
		{"ip", "link", "add", "cni0", "type", "bridge"},
		{"ip", "link", "set", "cni0", "up"},
		{"ip", "addr", "add", "10.244.1.1/24", "dev", "cni0"},
		{"ip", "route", "add", "10.244.2.0/24", "via", "172.20.0.1"},
		// The overlay link and what the fabric routes through it.
		{"ip", "link", "add", dataplane.OverlayLink, "type", "vxlan", "external", "dstport", "4790"},
		{"ip", "link", "set", dataplane.OverlayLink, "up"},
		{"ip", "route", "add", "10.99.0.0/16", "dev", dataplane.OverlayLink},
		// Not reached: a blackhole, another table, link-local space.
		{"ip", "route", "add", "blackhole", "10.61.0.0/16"},
		{"ip", "route", "add", "10.62.0.0/16", "via", "172.20.0.1", "table", "1803"},
		{"ip", "route", "add", "169.254.169.254/32", "via", "172.20.0.1"},
	} {
		node.MustRun(t, args[0], args[1:]...)
	}
	own := cidr.MustPrefixes("10.244.0.0/16", "10.96.0.0/12")
	got, err := nodeSubnets(node.Netlink(t), own)
	if err != nil {
		t.Fatal(err)
	}
	if want := cidr.MustPrefixes("10.60.0.0/16", "172.20.0.0/20", "192.168.40.0/22"); !slices.Equal(got, want) {
		t.Errorf("nodeSubnets = %v, want %v", got, want)
	}
}
