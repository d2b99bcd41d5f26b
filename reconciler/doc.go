// Package reconciler holds peerlink's controller-runtime reconcilers, one file
// <kind>_controller.go per kind, and SetupAll, which registers all of them
// with a manager.
//
// It owns the reaction of the control plane to the networking.liqo.io API:
// the ranges a Configuration's peer is remapped to (through package ipam),
// the gateway workloads of WgGatewayServer and WgGatewayClient, the
// cluster-info ConfigMap the CLI reads, and the kstatus conditions of every
// object it reconciles. It writes status and the objects it owns, never a
// user's spec. It does not build the manager (cmd/peerlink-agent does),
// render templates (package templates) or touch the data path (dataplane).
package reconciler
