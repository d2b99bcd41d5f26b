// Package gatewayrole owns the side a cluster's gateway takes in a peering,
// server or client, as the CLI's flags, the agents and the manifests spell
// it. Everything else peerlink knows of a role is its users': the type of
// the Connection that reports its tunnel is the API's (ConnectionTypeOf),
// the tunnel addresses are package dataplane's, the gateway kinds package
// manifests'. The package imports nothing, so that every layer, the pure
// planners included, can import it.
package gatewayrole
