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
	// carries traffic whose sources are routed elsewhere by design. When
	// the routing carries IPv6 (an address, a neighbor or a route that is
	// not unreachable), it also enables IPv6 forwarding on the link.
	Router bool
	// AcceptLocal accepts packets arriving on the link whose source is an
	// address of this namespace, which the kernel otherwise drops as
	// martians. It concerns IPv4 only: IPv6 has no such check, and
	// forwards and delivers those packets as any other.
	AcceptLocal bool
}

// Address is an address on an owned link, of either family; an IPv6
// address is usable at once (no duplicate address detection).
type Address struct {
	Link   string
	Prefix netip.Prefix
}

// Neighbor is a permanent neighbor entry, of either family: the link-layer
// address behind a next hop that is never resolved by ARP or neighbor
// discovery.
type Neighbor struct {
	Link string
	IP   netip.Addr
	MAC  net.HardwareAddr
}

// Route is a route in an owned table.
type Route struct {
	// Table is the routing table.
	Table int
	// Dst is the destination prefix, of either family.
	Dst netip.Prefix
	// Unreachable makes the route reject packets (no link, no next hop):
	// the sender gets an ICMP error, and a connecting socket fails at once.
	Unreachable bool
	// Blackhole makes the route drop packets silently (no link, no next
	// hop): a sender's TCP sends them again, as over a lossy path. It is
	// for a gap expected to close within seconds.
	Blackhole bool
	// Link is the outgoing link.
	Link string
	// Via is an on-link next hop; invalid for a directly connected route.
	// It may be of either family: an IPv6 route over an IPv4 underlay
	// names the IPv4 address of the node or gateway behind the overlay, an
	// IPv4 route over an IPv6 underlay (an IPv6-only cluster's IPv4
	// external range, a gateway's way back to its node) an IPv6 one. Unless
	// both are IPv4 it needs a Neighbor of the same link and address: the
	// applier routes through the link-local address derived from that
	// neighbor's MAC (Linux routes IPv6 only through IPv6 next hops, and
	// takes an on-link IPv6 next hop of an IPv4 route only link-local).
	Via netip.Addr
	// Encap, when valid, is the outer destination of an overlay tunnel in
	// metadata mode: the link encapsulates each packet towards it with VNI.
	// It is of the underlay's family, whatever the family of Dst.
	Encap netip.Addr
	// VNI is the tunnel identifier written with Encap.
	VNI uint32
}

// PolicyRule is a policy routing rule. A rule without Src is installed in
// both families; one with Src in the family of Src.
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

// maxVNI is the largest VXLAN network identifier (24 bits).
const maxVNI = 1<<24 - 1

// Validate checks the families of the addresses against one another and
// that every IPv6 route's next hop has a neighbor entry to route through.
// IPv4-mapped IPv6 addresses are refused everywhere: their family is
// ambiguous.
func (s Routing) Validate() error {
	for _, a := range s.Addresses {
		if !a.Prefix.IsValid() || a.Prefix.Addr().Is4In6() {
			return fmt.Errorf("address on link %s: Prefix %s is not an IPv4 or IPv6 prefix", a.Link, a.Prefix)
		}
	}
	type onLink struct {
		link string
		ip   netip.Addr
	}
	neighbors := map[onLink]bool{}
	for _, n := range s.Neighbors {
		if !n.IP.IsValid() || n.IP.Is4In6() {
			return fmt.Errorf("neighbor on link %s: IP %s is not an IPv4 or IPv6 address", n.Link, n.IP)
		}
		if len(n.MAC) != 6 {
			return fmt.Errorf("neighbor %s on link %s: MAC %s is not a 6-byte Ethernet address", n.IP, n.Link, n.MAC)
		}
		neighbors[onLink{n.Link, n.IP}] = true
	}
	for _, r := range s.Routes {
		if !r.Dst.IsValid() || r.Dst.Addr().Is4In6() {
			return fmt.Errorf("route in table %d: Dst %s is not an IPv4 or IPv6 prefix", r.Table, r.Dst)
		}
		if r.Unreachable && r.Blackhole {
			return fmt.Errorf("route %s: Unreachable and Blackhole exclude each other", r)
		}
		if r.DeadEnd() {
			if r.Link != "" || r.Via.IsValid() || r.Encap.IsValid() {
				return fmt.Errorf("route %s: an unreachable or blackhole route has no Link, Via or Encap", r)
			}
			continue
		}
		if r.Link == "" {
			return fmt.Errorf("route %s: Link is empty", r)
		}
		if r.Via.IsValid() {
			switch {
			case r.Via.Is4In6():
				return fmt.Errorf("route %s: Via %s is IPv4-mapped", r, r.Via)
			case (r.Dst.Addr().Is6() || r.Via.Is6()) && !neighbors[onLink{r.Link, r.Via}]:
				return fmt.Errorf("route %s: Via %s has no neighbor entry on link %s, which the next hop of an IPv6 route or through an IPv6 address needs", r, r.Via, r.Link)
			}
		}
		if r.Encap.IsValid() {
			if r.Encap.Is4In6() {
				return fmt.Errorf("route %s: Encap %s is IPv4-mapped", r, r.Encap)
			}
			if r.VNI > maxVNI {
				return fmt.Errorf("route %s: VNI %d is above %d", r, r.VNI, maxVNI)
			}
		}
	}
	for _, r := range s.Rules {
		if r.Src.IsValid() && r.Src.Addr().Is4In6() {
			return fmt.Errorf("rule %s: Src %s is IPv4-mapped", r, r.Src)
		}
	}
	return nil
}

// DeadEnd tells whether the route ends packets here, unreachable or
// blackhole, instead of sending them on.
func (r Route) DeadEnd() bool { return r.Unreachable || r.Blackhole }

// String renders a route as `ip route` would.
func (r Route) String() string {
	var b strings.Builder
	switch {
	case r.Unreachable:
		b.WriteString("unreachable ")
	case r.Blackhole:
		b.WriteString("blackhole ")
	}
	b.WriteString(r.Dst.String())
	if r.Encap.IsValid() {
		encap := "ip"
		if r.Encap.Is6() {
			encap = "ip6"
		}
		fmt.Fprintf(&b, " encap %s id %d dst %s", encap, r.VNI, r.Encap)
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
