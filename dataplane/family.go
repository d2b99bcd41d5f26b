package dataplane

import (
	"net/netip"

	"github.com/peerlink/peerlink/dataplane/plan"
)

// Both address families are planned as parallel planes: each range, set,
// map, route and NAT rule goes to the plane of its own family, and the IPv6
// plane exists only where there is something IPv6 to carry. The underlay
// (nodes, gateway pods, the overlay's outer header) is of one family, which
// need not be the family of the traffic it carries: an IPv6 route may have
// an IPv4 next hop, and the other way round.

// families are the address families, in the order plans list them.
var families = []plan.Family{plan.IPv4, plan.IPv6}

// ofFamily returns the prefixes of ps of family fam, in their order.
func ofFamily(ps []netip.Prefix, fam plan.Family) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		if plan.FamilyOf(p.Addr()) == fam {
			out = append(out, p)
		}
	}
	return out
}

// everything is the prefix holding every address of family fam.
func everything(fam plan.Family) netip.Prefix {
	if fam == plan.IPv6 {
		return netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
}

// host is the prefix of the one address a.
func host(a netip.Addr) netip.Prefix {
	return netip.PrefixFrom(a, a.BitLen())
}

// tcpIPHeaders is what an MSS leaves out of a packet of family fam: the IP
// and TCP headers without options.
func tcpIPHeaders(fam plan.Family) int {
	if fam == plan.IPv6 {
		return 60
	}
	return 40
}

// minIPv6MTU is the smallest MTU of a link that carries IPv6 (RFC 8200): the
// kernel turns IPv6 off on a link with a smaller one.
const minIPv6MTU = 1280
