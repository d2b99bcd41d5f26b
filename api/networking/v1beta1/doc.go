// Package v1beta1 holds the Go types of the networking.liqo.io/v1beta1 API that
// peerlink serves: Configuration, GatewayServer, GatewayClient, PublicKey,
// Connection, the gateway templates and the rendered WireGuard gateways.
//
// The field names, short names and printer columns follow the network-peering
// API of the Liqo project so that existing manifests apply unchanged. Every
// status additionally carries kstatus conditions (Ready, Reconciling, Stalled)
// and observedGeneration. The package imports nothing else of peerlink.
//
// +kubebuilder:object:generate=true
// +groupName=networking.liqo.io
package v1beta1
