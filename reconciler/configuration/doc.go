// Package configuration reconciles Configurations: it gives each peer's
// CIDRs, declared in spec.remote, the local ranges they are seen under
// here, and records them in status.remote. A peer range that collides with
// nothing here and lies in the address plan declared for peers is kept as
// it is; every other is remapped into the pools of its family. IPv4 and
// IPv6 ranges of one peer are placed independently, each in its own family
// (by default RFC 1918 for IPv4, fd00::/8 for IPv6). Ranges this cluster
// must never route to a peer (special-use ranges, those outside the
// allowlist, those holding a node address, a node's pod range or a gateway
// endpoint) are refused or remapped away, in both families.
//
// It does not program the dataplane, and does not detect the cluster's own
// ranges: those come in Options.
package configuration
