package ipremap

import "net/netip"

// Options are what the IP reconciler knows of its own cluster.
type Options struct {
	// ExternalCIDR is the range the addresses are allocated from; its
	// first address, the unknown source, is never given.
	ExternalCIDR netip.Prefix
	// PodCIDRs are this cluster's pod ranges: a pod is not what an IP
	// remaps, and a peer reaches pods by their own addresses.
	PodCIDRs []netip.Prefix
}
