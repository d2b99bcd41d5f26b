package ipam

import (
	"net/netip"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// RemoteStatus lays out the ranges assigned for a Configuration's
// spec.remote, given pod CIDRs first and then external ones as the Ledger
// takes them, as its status.remote: index-aligned with the spec, pods of
// them pod CIDRs.
func RemoteStatus(pods int, assigned []netip.Prefix) *netv1beta1.ClusterConfig {
	return &netv1beta1.ClusterConfig{CIDR: netv1beta1.ClusterConfigCIDR{
		Pod:      netv1beta1.CIDRsOf(assigned[:pods]),
		External: netv1beta1.CIDRsOf(assigned[pods:]),
	}}
}
