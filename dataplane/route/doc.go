// Package route owns the IP configuration the agents write through netlink:
// addresses and interface settings of their links, permanent neighbors,
// routes in peerlink's own routing tables (including routes that carry an
// overlay tunnel destination), and policy rules at peerlink's priorities,
// in both address families.
//
// The desired state is data (plan.Routing). Applier.Apply reads what the
// kernel has, writes only the difference, and removes what it owns but no
// longer wants: every route of the owned tables, every rule at the owned
// priorities, every address (but the kernel's IPv6 link-local one) and
// permanent neighbor of the owned links, IPv4 and IPv6 alike. A rule
// without a source address is installed in both families. It never
// touches other tables, priorities or links.
//
// An IPv6 route's next hop is written as the link-local address derived
// from its neighbor's MAC, whatever the family of the planned next hop
// (see nexthop.go), and IPv6 forwarding goes through /proc/sys, which
// netlink cannot write (see devconf.go).
//
// It does not create links (packages wireguard and overlay do) nor plan what
// the state should be (package dataplane does).
package route
