// Package overlay owns the link that carries traffic between the nodes of a
// cluster and its gateway pods: one Geneve or VXLAN link per network
// namespace, in metadata (external) mode, so that a single link reaches every
// gateway and every node. The destination of each packet is not a property
// of the link but of the route it takes (package route writes routes with an
// encapsulation destination), which keeps the per-packet cost at one route
// lookup however many gateways and nodes there are.
//
// Geneve, on UDP 6091, is used where the kernel has it; otherwise VXLAN on
// UDP 4790, a port no common CNI uses (flannel and Cilium use 8472 and 4789,
// Calico 4789). Both ends must agree: Detect is deterministic for a given
// kernel, and the fabric and gateway agents take the same --overlay flag.
//
// The links carry Ethernet frames. Every overlay link derives its MAC
// address from its underlay IP (plan.OverlayMAC), so a sender writes the
// receiver's MAC as a permanent neighbor entry and never needs ARP, which a
// link in metadata mode cannot carry.
//
// The link's desired state, its kinds and ports are data in package plan;
// this package creates, adopts and removes the link, and picks the kind the
// kernel can make (Detect).
//
// It does not decide which ranges go through the overlay (package dataplane
// plans that) nor write routes (package route).
package overlay
