package clusterinfo

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/peerlink/peerlink/internal/cidr"
)

// NodeSubnetsAnnotation is where the fabric agent of a node publishes, on
// its Node, the networks the node reaches other than through its default
// route: its on-link prefixes and the destinations of its other routes,
// comma-separated. The controller never routes a peer's range as it is
// over them.
const NodeSubnetsAnnotation = "peerlink.io/node-subnets"

// MaxNodeSubnets bounds the networks one node publishes: past it, they are
// widened (SummariseNodeSubnets), never dropped.
const MaxNodeSubnets = 64

// maxNodeSubnetsRead bounds the networks read from one Node: the 256 /8s,
// all that a summary widened to /8s can hold.
const maxNodeSubnetsRead = 256

// NodeSubnets returns the IPv4 networks published on node n, at most
// maxNodeSubnetsRead of them; entries that do not parse are skipped.
func NodeSubnets(n *corev1.Node) []netip.Prefix {
	v := n.Annotations[NodeSubnetsAnnotation]
	if v == "" {
		return nil
	}
	var out []netip.Prefix
	for s := range strings.SplitSeq(v, ",") {
		p, err := cidr.ParseNetwork(strings.TrimSpace(s))
		if err != nil || !p.Addr().Is4() {
			continue
		}
		if out = append(out, p); len(out) == maxNodeSubnetsRead {
			break
		}
	}
	return out
}

// SummariseNodeSubnets returns the networks ps cover, sorted, without the
// ones another holds, and at most MaxNodeSubnets of them: while there are
// more, each is widened to its /16, then to its /8 (the 256 /8s are the
// most that can remain). Widening reserves more than the node reaches,
// which only makes more peer ranges remapped.
func SummariseNodeSubnets(ps []netip.Prefix) []netip.Prefix {
	out := outermost(ps)
	for _, bits := range []int{16, 8} {
		if len(out) <= MaxNodeSubnets {
			break
		}
		wider := make([]netip.Prefix, len(out))
		for i, p := range out {
			wider[i] = netip.PrefixFrom(p.Addr(), min(p.Bits(), bits)).Masked()
		}
		out = outermost(wider)
	}
	return out
}

// outermost sorts ps by address and drops those another one holds.
func outermost(ps []netip.Prefix) []netip.Prefix {
	sorted := slices.Clone(ps)
	slices.SortFunc(sorted, func(a, b netip.Prefix) int {
		return cmp.Or(a.Addr().Compare(b.Addr()), a.Bits()-b.Bits())
	})
	var out []netip.Prefix
	for _, p := range sorted {
		if n := len(out); n > 0 && out[n-1].Bits() <= p.Bits() && out[n-1].Contains(p.Addr()) {
			continue
		}
		out = append(out, p)
	}
	return out
}
