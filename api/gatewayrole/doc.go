// Package gatewayrole owns the side a cluster's gateway takes in a peering,
// server or client, as the CLI's flags, the agents and the generators spell
// it, and its mapping to and from the Connection's type (Server, Client) of
// the API. Everything else peerlink knows of a role is its users': the
// tunnel addresses are package dataplane's, the gateway kinds package
// generators'. The package imports nothing of peerlink but the API types,
// so that every layer can import it.
package gatewayrole
