package configuration

import (
	"net/netip"

	"github.com/peerlink/peerlink/internal/rangepolicy"
)

// Options are what the Configuration reconciler knows of its own cluster.
type Options struct {
	// ClusterID is this cluster's ID, which no Configuration may name as
	// its peer.
	ClusterID string
	// Taken are this cluster's own ranges: a peer's range that collides
	// with one is remapped.
	Taken []netip.Prefix
	// Pools are the ranges remapped peer ranges are taken from, searched
	// in order; empty means ipam.DefaultPools.
	Pools []netip.Prefix
	// RoutedPeer is the address plan declared for peers: only a peer range
	// inside it is routed as it is.
	RoutedPeer []netip.Prefix
	// PeerPolicy tells which ranges a peer may declare at all.
	PeerPolicy rangepolicy.Policy
}
