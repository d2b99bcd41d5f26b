// Package configuration reconciles Configurations: it gives each peer's
// CIDRs, declared in spec.remote, the local ranges they are seen under
// here, and records them in status.remote. A peer range that collides with
// nothing here and lies in the address plan declared for peers is kept as
// it is; every other is remapped into the pools. Ranges this cluster must
// never route to a peer (special-use ranges, those outside the allowlist,
// those holding a node address or a gateway endpoint) are refused or
// remapped away.
package configuration
