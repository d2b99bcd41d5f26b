package plan

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// Routing is the desired IP configuration of one network namespace, and
// the extent of what peerlink owns in it.
type Routing struct {
	// Links are the interface settings of peerlink's links.
	Links []Link
	// Addresses are the addresses of the owned links.
	Addresses []Address
	// Neighbors are permanent neighbor entries on the owned links.
	Neighbors []Neighbor
	// Routes are the routes of the owned tables.
	Routes []Route
	// Rules are the policy rules at the owned priorities.
	Rules []PolicyRule
	// Tables are the routing tables peerlink owns entirely.
	Tables []int
	// RulePriorities are the rule priorities peerlink owns entirely.
	RulePriorities []int
	// LocalExceptIIF, when set, keeps the local table from being looked up
	// for packets arriving on that link: the kernel's rule at priority 0 is
	// replaced by one that skips them, so that they follow the owned
	// rules even when their destination is an address of this namespace.
	LocalExceptIIF string
}

// Link is the setting of a link peerlink created.
type Link struct {
	// Name of the link.
	Name string
	// MTU of the link; 0 leaves it as it is.
	MTU int
	// Router enables IPv4 forwarding of packets arriving on the link and
	// disables the reverse-path filter and ICMP redirects on it: the link
	// carries traffic whose sources are routed elsewhere by design.
	Router bool
	// AcceptLocal accepts packets arriving on the link whose source is an
	// address of this namespace, which the kernel otherwise drops as
	// martians.
	AcceptLocal bool
}

// Address is an address on an owned link.
type Address struct {
	Link   string
	Prefix netip.Prefix
}

// Neighbor is a permanent neighbor entry: the link-layer address behind a
// next hop that is never resolved by ARP.
type Neighbor struct {
	Link string
	IP   netip.Addr
	MAC  net.HardwareAddr
}

// Route is a route in an owned table.
type Route struct {
	// Table is the routing table.
	Table int
	// Dst is the destination prefix.
	Dst netip.Prefix
	// Unreachable makes the route reject packets (no link, no next hop).
	Unreachable bool
	// Link is the outgoing link.
	Link string
	// Via is an on-link next hop; invalid for a directly connected route.
	Via netip.Addr
	// Encap, when valid, is the outer destination of an overlay tunnel in
	// metadata mode: the link encapsulates each packet towards it with VNI.
	Encap netip.Addr
	// VNI is the tunnel identifier written with Encap.
	VNI uint32
}

// PolicyRule is a policy routing rule.
type PolicyRule struct {
	// Priority orders the rule among all rules; peerlink owns it.
	Priority int
	// IIF matches packets that arrived on this link; empty matches any.
	IIF string
	// Src matches source addresses; invalid matches any.
	Src netip.Prefix
	// Table is looked up on a match.
	Table int
}

// String renders a route as `ip route` would.
func (r Route) String() string {
	var b strings.Builder
	if r.Unreachable {
		b.WriteString("unreachable ")
	}
	b.WriteString(r.Dst.String())
	if r.Encap.IsValid() {
		fmt.Fprintf(&b, " encap ip id %d dst %s", r.VNI, r.Encap)
	}
	if r.Via.IsValid() {
		fmt.Fprintf(&b, " via %s", r.Via)
	}
	if r.Link != "" {
		fmt.Fprintf(&b, " dev %s", r.Link)
	}
	if r.Via.IsValid() {
		b.WriteString(" onlink")
	}
	fmt.Fprintf(&b, " table %d", r.Table)
	return b.String()
}

// String renders a rule as `ip rule` would.
func (r PolicyRule) String() string {
	from := "all"
	if r.Src.IsValid() {
		from = r.Src.String()
	}
	s := fmt.Sprintf("%d: from %s", r.Priority, from)
	if r.IIF != "" {
		s += " iif " + r.IIF
	}
	return s + fmt.Sprintf(" lookup %d", r.Table)
}

// String renders a neighbor as `ip neigh` would.
func (n Neighbor) String() string {
	return fmt.Sprintf("%s dev %s lladdr %s permanent", n.IP, n.Link, n.MAC)
}

// String renders an address as `ip addr` would.
func (a Address) String() string {
	return fmt.Sprintf("%s dev %s", a.Prefix, a.Link)
}

// String renders link settings.
func (l Link) String() string {
	s := "link " + l.Name
	if l.MTU != 0 {
		s += fmt.Sprintf(" mtu %d", l.MTU)
	}
	if l.Router {
		s += " forwarding on rp_filter off send_redirects off"
	}
	if l.AcceptLocal {
		s += " accept_local on"
	}
	return s
}

// String renders the routing for people, as ip(8) lists each part, a
// section each.
func (s Routing) String() string {
	var b strings.Builder
	b.WriteString("\n# links\n")
	for _, l := range s.Links {
		fmt.Fprintln(&b, l)
	}
	if len(s.Addresses) > 0 {
		b.WriteString("\n# addresses\n")
		for _, a := range s.Addresses {
			fmt.Fprintln(&b, a)
		}
	}
	if len(s.Neighbors) > 0 {
		b.WriteString("\n# neighbors\n")
		for _, n := range s.Neighbors {
			fmt.Fprintln(&b, n)
		}
	}
	fmt.Fprintf(&b, "\n# routes (tables %v)\n", s.Tables)
	for _, r := range s.Routes {
		fmt.Fprintln(&b, r)
	}
	fmt.Fprintf(&b, "\n# rules (priorities %v)\n", s.RulePriorities)
	if s.LocalExceptIIF != "" {
		fmt.Fprintf(&b, "0: not from all iif %s lookup local (replaces 0: from all lookup local)\n", s.LocalExceptIIF)
	}
	for _, r := range s.Rules {
		fmt.Fprintln(&b, r)
	}
	return b.String()
}

// Sorted returns a copy of s with every list in a canonical order, so that
// two equal states compare and print alike.
func (s Routing) Sorted() Routing {
	out := Routing{
		Links:          slices.Clone(s.Links),
		Addresses:      slices.Clone(s.Addresses),
		Neighbors:      slices.Clone(s.Neighbors),
		Routes:         slices.Clone(s.Routes),
		Rules:          slices.Clone(s.Rules),
		Tables:         slices.Clone(s.Tables),
		RulePriorities: slices.Clone(s.RulePriorities),
		LocalExceptIIF: s.LocalExceptIIF,
	}
	slices.SortFunc(out.Links, func(a, b Link) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(out.Addresses, func(a, b Address) int {
		if c := strings.Compare(a.Link, b.Link); c != 0 {
			return c
		}
		return a.Prefix.Compare(b.Prefix)
	})
	slices.SortFunc(out.Neighbors, func(a, b Neighbor) int {
		if c := strings.Compare(a.Link, b.Link); c != 0 {
			return c
		}
		return a.IP.Compare(b.IP)
	})
	slices.SortFunc(out.Routes, func(a, b Route) int {
		if a.Table != b.Table {
			return a.Table - b.Table
		}
		return a.Dst.Compare(b.Dst)
	})
	slices.SortFunc(out.Rules, func(a, b PolicyRule) int {
		if a.Priority != b.Priority {
			return a.Priority - b.Priority
		}
		return strings.Compare(a.String(), b.String())
	})
	slices.Sort(out.Tables)
	slices.Sort(out.RulePriorities)
	return out
}
