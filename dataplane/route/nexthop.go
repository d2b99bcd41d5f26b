package route

import (
	"net"
	"net/netip"

	"github.com/peerlink/peerlink/dataplane/plan"
)

// Linux routes IPv6 only through IPv6 next hops: an IPv6 route with an
// IPv4 gateway is refused both as RTA_VIA ("IPv6 does not support RTA_VIA
// attribute") and through a nexthop object ("IPv6 routes can not use an
// IPv4 nexthop"). An IPv6 gateway that is not link-local is refused as an
// on-link next hop of the overlay link whenever the main table routes it
// through another link ("Nexthop has invalid gateway or device
// mismatch"), which is the case of a node's address inside a gateway pod
// and of a pod's address on a node. So every IPv6 route's next hop is
// written as the link-local address of the neighbor's MAC (modified
// EUI-64, RFC 4291 appendix A: the address the neighbor's own link
// derives from that MAC), with a permanent IPv6 neighbor entry of its own.
// An IPv4 route through an IPv6 next hop (RTA_VIA, kernel >= 5.2) takes
// the same link-local address: the kernel checks its gateway as it does an
// IPv6 route's, where no on-link flag helps.
// With a metadata-mode overlay the next hop only chooses the inner
// destination MAC; the outer destination is the route's encapsulation.

// linkLocal is the modified EUI-64 link-local address of a 6-byte MAC.
func linkLocal(mac net.HardwareAddr) netip.Addr {
	return netip.AddrFrom16([16]byte{
		0: 0xfe, 1: 0x80,
		8: mac[0] ^ 0x02, 9: mac[1], 10: mac[2], 11: 0xff, 12: 0xfe, 13: mac[3], 14: mac[4], 15: mac[5],
	})
}

// onLink names a neighbor: an address on a link.
type onLink struct {
	link string
	ip   netip.Addr
}

// nextHops maps the next hop of each route of want that is routed through
// a link-local address (linkLocalHop) to the neighbor entry the kernel
// routes it through; plan.Routing.Validate has made sure the planned
// neighbor exists.
func nextHops(want plan.Routing) map[onLink]plan.Neighbor {
	macs := map[onLink]net.HardwareAddr{}
	for _, n := range want.Neighbors {
		macs[onLink{n.Link, n.IP}] = n.MAC
	}
	out := map[onLink]plan.Neighbor{}
	for _, r := range want.Routes {
		if !linkLocalHop(r) {
			continue
		}
		via := onLink{r.Link, r.Via}
		mac := macs[via]
		out[via] = plan.Neighbor{Link: r.Link, IP: linkLocal(mac), MAC: mac}
	}
	return out
}

// linkLocalHop tells whether r goes through the link-local address of its
// next hop's neighbor: it has a next hop, and the route or the next hop is
// IPv6.
func linkLocalHop(r plan.Route) bool {
	return r.Via.IsValid() && (r.Dst.Addr().Is6() || r.Via.Is6())
}
