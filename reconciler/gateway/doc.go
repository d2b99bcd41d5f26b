// Package gateway reconciles the gateway kinds. A server kind and its
// client kind differ only in their fields and in the steps a server adds,
// so such a pair has one reconciler, told the kind by a value describing
// it (kind.go):
//   - gateway_controller.go: GatewayServer and GatewayClient, rendered from
//     their template (render.go) into a WgGatewayServer or WgGatewayClient;
//   - wggateway_controller.go: WgGatewayServer and WgGatewayClient, the
//     workload running a gateway (workload.go), its keys (keys.go,
//     rotation.go) and, for a server, the Service and endpoint it is
//     reached at (endpoint.go);
//   - ipreaders.go: the subjects of the ClusterRoleBinding through which
//     every gateway reads the IPs of every namespace.
//
// What it makes is applied server-side (package apply), and never over an
// object someone else made.
package gateway
