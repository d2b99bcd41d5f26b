// Package nat owns the nftables tables of the agents. Applier.Apply writes a
// plan.Ruleset (the data type, in package plan) as one table of the
// ruleset's family (ip or ip6), replaced in one atomic transaction when it
// differs from what the kernel holds, untouched when it does not; Remove
// deletes the table of one family. Other tables are never touched. Each
// rule is compiled into nftables expressions and carries a fingerprint of
// its nft syntax in its comment, so that a rule edited by hand is told
// apart from the one peerlink wrote.
//
// Tables are read through the nftables library; transactions are encoded
// here (batch) as netlink messages, because the library cannot write the
// set userdata that nft needs to print a map of address ranges.
//
// It does not decide what the rules are (package dataplane plans them) nor
// define the ruleset's vocabulary (package plan does).
package nat
