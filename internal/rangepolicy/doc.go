// Package rangepolicy decides which of a peer's declared ranges this cluster
// may route at all. A peer declares its pod and external CIDRs; whether one
// is acceptable is the local side's decision, made by the same rules in the
// controller and in every CLI command that reads a peer's manifests.
//
// The rules: only IPv4; never a special-use range (RFC 6890: this network,
// loopback, link-local, multicast, reserved, broadcast) nor anything that
// holds one, such as a default route; and only inside the installer's
// allowlist (by default the private ranges of RFC 1918 and the shared address
// space of RFC 6598).
//
// CheckServerAddr holds the address a peer names for its gateway server
// to the same spirit: never this cluster's own loopback, link-local,
// multicast or broadcast addresses.
//
// Where an accepted range may land is the local side's too: as it is only
// inside the address plan the installer declared for peers (Policy.Routed,
// empty by default) and never on a well-known cloud service address
// (ServiceAddresses); anywhere else it is remapped. The IPAM (package ipam)
// makes the final choice, also remapping a range that collides with local
// ranges, node addresses or gateway endpoints.
package rangepolicy
