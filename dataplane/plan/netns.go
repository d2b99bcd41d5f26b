package plan

import (
	"fmt"
	"strings"
)

// NetNS is what both agents write into their network namespace: the
// overlay link, the routing and an nftables table per address family. A
// gateway's plan adds its WireGuard tunnel.
type NetNS struct {
	// Overlay is the overlay link.
	Overlay Overlay
	// Routes are the link settings, addresses, neighbors, routes and rules.
	Routes Routing
	// NAT is the nftables table of family ip.
	NAT Ruleset
	// NAT6 is the nftables table of family ip6 (its Family is IPv6), named
	// as NAT. Empty (see Ruleset.Empty), it stands for no ip6 table: a
	// cluster without IPv6 ranges has none.
	NAT6 Ruleset
}

// String renders the state for people, a section each: the overlay link,
// the routing and the nftables table of family ip, then the one of family
// ip6 when there is one.
func (n NetNS) String() string {
	var b strings.Builder
	o := n.Overlay
	fmt.Fprintf(&b, "# overlay\nlink %s kind %s port %d underlay %s mac %s\n", o.Name, o.Kind, o.Kind.Port(), o.Underlay, OverlayMAC(o.Underlay))
	b.WriteString(n.Routes.String())
	fmt.Fprintf(&b, "\n# nftables\n%s", n.NAT)
	if !n.NAT6.Empty() {
		fmt.Fprintf(&b, "\n# nftables ip6\n%s", n.NAT6)
	}
	return b.String()
}
