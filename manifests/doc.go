// Package manifests is the model of the manifests two peerlink
// administrators exchange (Configuration, GatewayServer, GatewayClient,
// PublicKey): it builds them from options, checks them field by field,
// parses and prints them. The peer bundles that carry them through Git are
// package peerbundle's.
//
// Everything here is pure and deterministic: the same input gives
// byte-identical YAML, with sorted keys, no timestamps and no generated
// names. The package owns no client, reads no file and keeps no state;
// packages peering and peerbundle read the cluster or the disk and hand the
// facts in. It does not render gateway templates (package templates) nor
// allocate remapped ranges (the controller does).
package manifests
