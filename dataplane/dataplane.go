package dataplane

import (
	"net/netip"

	"github.com/peerlink/peerlink/api/gatewayrole"
	"github.com/peerlink/peerlink/dataplane/plan"
)

// Names and numbers of the kernel objects peerlink owns.
const (
	// TunnelLink is the WireGuard link of a gateway.
	TunnelLink = "peerlink-tunnel"
	// LegacyTunnelLink is the name the WireGuard link of a gateway had in
	// earlier releases: a kernel link of that name is adopted (renamed), so
	// an upgrade in place keeps its sessions.
	LegacyTunnelLink = "liqo-tunnel"
	// OverlayLink is the overlay link of a gateway pod and of a node.
	OverlayLink = "peerlink-ovl"
	// GatewayNFTable is the nftables table of a gateway, in family ip and,
	// with IPv6 ranges, in family ip6.
	GatewayNFTable = "peerlink-gw"
	// FabricNFTable is the nftables table of a node, in family ip and, with
	// IPv6 ranges, in family ip6.
	FabricNFTable = "peerlink-fabric"

	// TableToPeer holds, in a gateway, the peer's real ranges via the
	// tunnel; traffic from the overlay is looked up there.
	TableToPeer = 1801
	// TableFromPeer holds, in a gateway, the route back to its node through
	// the overlay; traffic from the tunnel is looked up there.
	TableFromPeer = 1802
	// TablePodSources holds, on a node, every remote range via the overlay
	// to the gateway of its peer; pod sources are looked up there.
	TablePodSources = 1803
	// TableHostSources holds, on a node, every remote range via the overlay
	// to the gateway of its peer, as TablePodSources does; other sources
	// (the node itself, host-network pods) are looked up there.
	TableHostSources = 1804
	// TableOtherNodes holds, on a node, the pod ranges and the addresses of
	// the other nodes via the overlay to each node; what a local gateway
	// sends through the overlay is looked up there, so that a pod or a node
	// gets its peers' packets through the overlay too, as its own leave.
	TableOtherNodes = 1805

	// HealthPort is the UDP port of the tunnel's ping responder, on the
	// tunnel addresses.
	HealthPort = 12345
	// ServicesPort is the TCP port of the service exchange (package
	// mcs/exchange), on the server's tunnel address.
	ServicesPort = 12346
)

// Rule priorities equal the numbers of the tables they look up: after the
// local table (0), before main (32766), and apart from the low numbers CNIs
// use.
const (
	PriorityToPeer     = TableToPeer
	PriorityFromPeer   = TableFromPeer
	PriorityPodSources = TablePodSources
	PriorityHostSource = TableHostSources
	PriorityOtherNodes = TableOtherNodes
)

// owned is what a plan owns whatever its facts: the overlay link, the
// nftables tables nft of both families, the routing tables and the rule
// priorities.
func owned(nft string, tables, priorities []int) plan.NetNS {
	return plan.NetNS{
		Overlay: plan.Overlay{Name: OverlayLink},
		Routes:  plan.Routing{Tables: tables, RulePriorities: priorities},
		NAT:     plan.Ruleset{Table: nft},
		NAT6:    plan.Ruleset{Table: nft, Family: plan.IPv6},
	}
}

// Tunnel addresses: a /30 of link-local space, the server .1, the client .2.
var (
	TunnelPrefix  = netip.MustParsePrefix("169.254.18.0/30")
	ServerAddress = netip.MustParseAddr("169.254.18.1")
	ClientAddress = netip.MustParseAddr("169.254.18.2")
)

// TunnelAddress is the address of a gateway of role r on the tunnel.
func TunnelAddress(r gatewayrole.Role) netip.Addr {
	if r == gatewayrole.Server {
		return ServerAddress
	}
	return ClientAddress
}

// PeerTunnelAddress is the address on the tunnel of the peer of a gateway
// of role r.
func PeerTunnelAddress(r gatewayrole.Role) netip.Addr {
	if r == gatewayrole.Server {
		return ClientAddress
	}
	return ServerAddress
}

// RangeMapping is one range of the peer: Real as the peer routes it, Remapped
// as this cluster sees it (equal when it collides with nothing here). The
// pairs come index-aligned from a Configuration's spec.remote and
// status.remote.
type RangeMapping struct {
	Real     netip.Prefix
	Remapped netip.Prefix
}

// IPMapping is a local address outside the pod network that this cluster
// remaps into its external range (an IP object): Local is the host's real
// address, Remapped the address of the external range the peers reach it at.
type IPMapping struct {
	Local    netip.Addr
	Remapped netip.Addr
}

// MaxIPs bounds the IPMappings a gateway programs, the API's
// (ipam/v1alpha1 MaxIPs): the planner does not import the API, a test
// checks they agree.
const MaxIPs = 1024

// UnknownSource is the unknown-source address of a cluster whose external
// CIDR is external: its first address.
func UnknownSource(external netip.Prefix) netip.Addr {
	return external.Masked().Addr()
}
