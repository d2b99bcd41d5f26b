// Package route owns the IP configuration the agents write through netlink:
// addresses and interface settings of their links, permanent neighbors,
// routes in peerlink's own routing tables (including routes that carry an
// overlay tunnel destination), and policy rules at peerlink's priorities.
//
// The desired state is data (plan.Routing). Applier.Apply reads what the
// kernel has, writes only the difference, and removes what it owns but no
// longer wants: every route of the owned tables, every rule at the owned
// priorities, every address and permanent neighbor of the owned links. It
// never touches other tables, priorities or links.
//
// It does not create links (packages wireguard and overlay do) nor plan what
// the state should be (package dataplane does).
package route
