// Package cidr holds small pure helpers on IP prefixes shared by the
// controller, the dataplane and the CLI: parsing a network in CIDR notation
// strictly, finding overlaps in a set of prefixes, and translating an address
// between a peer's real range and the range it is remapped to.
//
// It owns no state and does no allocation: choosing remapped ranges is the
// business of package ipam, applying them the business of the dataplane.
package cidr
