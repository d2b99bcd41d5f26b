// Package dataplane plans the kernel state of peerlink's two agents, purely:
// PlanGateway (gatewayplan.go) turns the facts of one peering (role, keys,
// endpoint, MTU, the peer's real and remapped ranges, the overlay) into the
// desired state of a gateway pod's network namespace, and PlanFabric
// (fabricplan.go) turns the facts of one node (its pod CIDRs, the active
// gateways and the ranges behind each) into the desired state of the node.
// A plan is data, made of the types of package plan: a WireGuard
// configuration, the overlay link, addresses, routes and policy rules, and
// an nftables ruleset. GatewayOwned and FabricOwned name what such a plan
// owns whatever its facts, which is what an agent removes. The package also
// names the kernel objects peerlink owns (dataplane.go).
//
// Planning reads no clock, no API and no kernel, and imports nothing that
// does (a test runs `go list -deps` to keep it so). The agents (packages
// gateway and fabric) gather the facts, and packages wireguard, overlay,
// route and nat apply the plans.
//
// The data path it plans:
//
//   - A pod sends to a remote pod's remapped address. Its node looks the
//     destination up in peerlink's table (one rule, one longest-prefix
//     match) and sends the packet through the overlay to the gateway pod of
//     that peer, keeping the pod's source address (an identity SNAT that
//     runs before the CNI's masquerade).
//   - The gateway rewrites the destination from the remapped range to the
//     peer's real range, host bits kept, through one nftables interval map,
//     and routes everything that came from the overlay by its input link into
//     the tunnel table, which holds the peer's real ranges and rejects the
//     rest. The real range usually equals the gateway's own pod CIDR, which is
//     why the choice is made by input link and not by destination.
//   - The receiving gateway rewrites the source from the sender's real range
//     to the range it knows the sender by, and routes everything that came
//     from the tunnel to its own node through the overlay; the node delivers
//     to the pod as any host does.
//   - A node's own traffic (a source outside the pod CIDRs) leaves through
//     the node of the peer's gateway, which translates its source to the
//     cluster's unknown-source address, so that the reply, which returns to
//     that node, finds the translation to undo.
package dataplane
