// Package plan holds the data a plan is made of: a WireGuard configuration
// and its keys, an overlay link, the routing of a network namespace (link
// settings, addresses, neighbors, routes, policy rules) and an nftables
// ruleset, with their canonical order, their validation and the text that
// shows them to people. Like wgctrl's wgtypes, it is a leaf: it imports no
// kernel, netlink, nftables or WireGuard package, so that the planners that
// produce these values stay pure and the appliers that consume them
// (packages wireguard, overlay, route and nat) depend on it, never on the
// planners.
//
// It does not decide what the values are (package dataplane plans them) nor
// write them anywhere (the appliers do).
package plan
