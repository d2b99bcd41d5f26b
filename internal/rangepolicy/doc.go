// Package rangepolicy decides which of a peer's declared ranges this cluster
// may route at all. A peer declares its pod and external CIDRs; whether one
// is acceptable is the local side's decision, made by the same rules in the
// controller and in every CLI command that reads a peer's manifests.
//
// The rules, the same for IPv4 and IPv6 ranges: never a special-use range
// nor anything that holds one, such as a default route (IPv4, RFC 6890:
// this network, loopback, link-local, multicast, reserved, broadcast; IPv6:
// unspecified, loopback, IPv4-mapped, NAT64, discard-only, IETF protocol
// assignments, documentation, link-local, site-local, multicast); and only
// inside the installer's allowlist (by default the private ranges of RFC
// 1918, the shared address space of RFC 6598 and the IPv6 unique local
// addresses fc00::/7 of RFC 4193; a global unicast IPv6 range takes an
// allowlist entry). RuleFamily is left for what is no network at all.
//
// CheckServerAddr holds the address a peer names for its gateway server
// to the same spirit: never this cluster's own loopback, link-local,
// multicast or broadcast addresses, in either family.
//
// Where an accepted range may land is the local side's too: as it is only
// inside the address plan the installer declared for peers (Policy.Routed,
// empty by default) and never on a well-known cloud service address
// (ServiceAddresses); anywhere else it is remapped. The IPAM (package ipam)
// makes the final choice, also remapping a range that collides with local
// ranges, node addresses or gateway endpoints: this package does not know
// the cluster's ranges.
package rangepolicy
