// Package reconciler assembles peerlink's controller: SetupAll registers
// the reconcilers of each domain with a manager, fed from ClusterFacts,
// what the controller knows of its own cluster (its flags, or what it
// detected), and keeps the objects the controller publishes in its
// namespace applied (the cluster-info ConfigMap, the default gateway
// templates, the ClusterProperty of the cluster's ID).
//
// The reconcilers live by domain, each with its own Options:
//   - configuration: Configuration, the ranges a peer's CIDRs are remapped
//     to (through package ipam);
//   - gateway: GatewayServer and GatewayClient, rendered from their
//     templates into a WgGatewayServer or WgGatewayClient, and those, the
//     workload running a gateway, its keys and, for a server, the Service
//     and endpoint it is reached at;
//   - ipremap: IP (ipam.liqo.io/v1alpha1), the address of the external
//     CIDR a host outside the pod network is remapped to (through package
//     ipam);
//   - services: the Multi-Cluster Services API, this cluster's exports
//     published to each peer and every peer's exports imported.
//
// All of them conclude a reconcile in the terms of package outcome: Ready,
// Progressing or Stalled, recorded as kstatus conditions. The controller
// writes status and the objects it owns, never a user's spec. It does not
// build the manager (cmd/peerlink-agent does), render templates (package
// templates) or touch the data path (dataplane).
//
// The tests of this package run the controller as SetupAll assembles it;
// those of each domain run its reconcilers alone.
package reconciler
