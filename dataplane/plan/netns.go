package plan

import (
	"fmt"
	"strings"
)

// NetNS is what both agents write into their network namespace: the
// overlay link, the routing and an nftables table. A gateway's plan adds its
// WireGuard tunnel.
type NetNS struct {
	// Overlay is the overlay link.
	Overlay Overlay
	// Routes are the link settings, addresses, neighbors, routes and rules.
	Routes Routing
	// NAT is the nftables table.
	NAT Ruleset
}

// String renders the state for people, a section each: the overlay link,
// the routing and the nftables table.
func (n NetNS) String() string {
	var b strings.Builder
	o := n.Overlay
	fmt.Fprintf(&b, "# overlay\nlink %s kind %s port %d underlay %s mac %s\n", o.Name, o.Kind, o.Kind.Port(), o.Underlay, OverlayMAC(o.Underlay))
	b.WriteString(n.Routes.String())
	fmt.Fprintf(&b, "\n# nftables\n%s", n.NAT)
	return b.String()
}
