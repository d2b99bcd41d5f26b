// Package nat owns the nftables tables of the agents. A Ruleset is data: the
// sets and prefix maps a table holds and its chains of rules, each rule a
// few matches and one statement drawn from the small vocabulary peerlink
// needs (prefix NAT through a map, identity SNAT, SNAT to an address, TCP MSS
// clamping). Every lookup goes through a set or an interval map, so the
// number of rules on the packet path does not depend on the number of peers
// or ranges.
//
// Applier.Apply writes a Ruleset as one table, replaced in one atomic
// transaction when it differs from what the kernel holds, untouched when it
// does not; Remove deletes the table. Other tables are never touched.
//
// It does not decide what the rules are (package dataplane plans them).
package nat
