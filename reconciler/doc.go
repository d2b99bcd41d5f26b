// Package reconciler holds peerlink's controller-runtime reconcilers and
// SetupAll, which registers all of them with a manager.
//
// Each reconciler has its file <kind>_controller.go. A server kind and its
// client kind differ only in their fields and in the steps a server adds,
// so such a pair has one reconciler, told the kind by a value describing it:
//   - configuration_controller.go: Configuration, the ranges of a peer;
//   - gateway_controller.go: GatewayServer and GatewayClient, rendered from
//     their template (render.go) into a WgGatewayServer or WgGatewayClient;
//   - wggateway_controller.go: WgGatewayServer and WgGatewayClient, the
//     workload running a gateway (workload.go), its keys (keys.go) and, for
//     a server, the Service and endpoint it is reached at (endpoint.go).
//
// The gateway reconcilers share one flow (status.go): read the object, run
// the kind's steps, record the outcome as kstatus conditions, patch the
// status when it changed.
//
// It owns the reaction of the control plane to the networking.liqo.io API:
// the ranges a Configuration's peer is remapped to (through package ipam),
// the gateway workloads of WgGatewayServer and WgGatewayClient, the
// cluster-info ConfigMap the CLI reads, and the kstatus conditions of every
// object it reconciles. It writes status and the objects it owns, never a
// user's spec. It does not build the manager (cmd/peerlink-agent does),
// render templates (package templates) or touch the data path (dataplane).
package reconciler
