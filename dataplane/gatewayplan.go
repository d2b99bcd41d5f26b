package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/peerlink/peerlink/api/gatewayrole"
	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/internal/cidr"
)

// GatewayFacts are what a gateway agent knows about its peering.
type GatewayFacts struct {
	// Role is the gateway's side of the tunnel.
	Role gatewayrole.Role
	// PrivateKey is the gateway's own WireGuard key.
	PrivateKey plan.Key
	// NextPrivateKey is the key the gateway is to rotate to; zero: none.
	NextPrivateKey plan.Key
	// PeerPublicKey is the peer gateway's WireGuard public key.
	PeerPublicKey plan.Key
	// PeerNextPublicKey is the key the peer gateway announced it rotates
	// to; zero: none.
	PeerNextPublicKey plan.Key
	// ListenPort is the server's WireGuard port.
	ListenPort int
	// Endpoint is where a client finds the server; invalid while unknown.
	Endpoint netip.AddrPort
	// MTU of the tunnel.
	MTU int
	// PathMTU is the largest packet the health probes saw cross the
	// tunnel; 0 while unmeasured. Below MTU, TCP is clamped to it.
	PathMTU int
	// Keepalive is the WireGuard persistent keepalive; 0 disables it.
	Keepalive time.Duration
	// Remote are the peer's ranges, pod ranges and external ranges alike.
	Remote []RangeMapping
	// LocalRanges are this cluster's pod ranges and its external range:
	// the only destinations packets from the tunnel may have.
	LocalRanges []netip.Prefix
	// UnknownSource is the cluster's unknown-source address, the first
	// address of its external range: what arrives from the overlay with a
	// source outside LocalRanges (a node, a host-network pod) leaves as it.
	// Invalid: such packets are not translated, and the peer drops them.
	UnknownSource netip.Addr
	// IPs are the local hosts outside the pod network remapped into the
	// external range, at most MaxIPs: packets from the tunnel to a
	// Remapped address go to its Local one, and of the external range only
	// these addresses and the unknown source are reachable from the
	// tunnel. They need UnknownSource, which tells the external range.
	IPs []IPMapping
	// Overlay is how the gateway pod meets the nodes of its cluster.
	Overlay GatewayOverlay
	// Standby marks a replica that is not the active one: everything is
	// ready but the WireGuard peer, so that it answers nobody on the
	// tunnel (a client replica would otherwise take the server's session
	// from the active one) and takes over by adding it.
	Standby bool
}

// GatewayOverlay are the facts of a gateway pod's overlay endpoint.
type GatewayOverlay struct {
	// Kind is the encapsulation the cluster's fabric uses.
	Kind plan.OverlayKind
	// Address is the gateway pod's own address, where nodes send overlay
	// packets; it names the overlay link's MAC address.
	Address netip.Addr
	// Node is the address of the node running the gateway pod, where
	// traffic from the tunnel is sent. Invalid: that traffic follows the
	// pod's own routes instead.
	Node netip.Addr
	// MTU of the overlay link: the pod link's MTU less the encapsulation.
	MTU int
}

// GatewayPlan is the desired state of a gateway pod's network namespace:
// the tunnel, and the overlay link, routing and nftables table a node has
// too.
type GatewayPlan struct {
	// WireGuard is the configuration of TunnelLink.
	WireGuard plan.WireGuard
	// TunnelMTU is the MTU TunnelLink is created with.
	TunnelMTU int
	plan.NetNS
}

// GatewayOwned is the part of every gateway plan that its facts do not
// change: the names of its overlay link and nftables table, and the routing
// tables, rule priorities and local-table rule it owns. It is what a gateway
// removes when it stops.
func GatewayOwned() plan.NetNS {
	o := owned(GatewayNFTable, []int{TableToPeer, TableFromPeer}, []int{PriorityToPeer, PriorityFromPeer})
	o.Routes.LocalExceptIIF = OverlayLink
	return o
}

// Names of the gateway's nftables sets, maps and chains.
const (
	mapRemappedToReal = "remapped_to_real"
	mapRealToRemapped = "real_to_remapped"
	mapIPToLocal      = "ip_to_local"
	mapLocalToIP      = "local_to_ip"
	setPeerRanges     = "peer_ranges"
	setLocalRanges    = "local_ranges"
	setReachable      = "reachable"
)

// Reasons the ingress filter drops a packet from the tunnel for, which are
// also the names of its counters.
const (
	// DropSource: the source is not in the peer's declared ranges.
	DropSource = "source"
	// DropGateway: the packet is for the gateway pod itself and is not the
	// health probe.
	DropGateway = "gateway"
	// DropDestination: the destination is not in this cluster's pod or
	// external ranges (a node, a Service, another peer).
	DropDestination = "destination"
)

// IngressDropReasons lists the reasons of the ingress filter, in the order
// its rules check them.
func IngressDropReasons() []string {
	return []string{DropSource, DropGateway, DropDestination}
}

// PlanGateway computes the desired state of a gateway from its facts. It
// fails, naming the fact, when the facts cannot make a working tunnel.
func PlanGateway(f GatewayFacts) (GatewayPlan, error) {
	if err := f.validate(); err != nil {
		return GatewayPlan{}, err
	}
	// A family this cluster has no pods of is not peered: nothing here
	// could send to the peer's ranges of it, or answer from them.
	f.Remote = slices.DeleteFunc(slices.Clone(f.Remote), func(m RangeMapping) bool { return !f.hasPods(plan.FamilyOf(m.Real.Addr())) })
	p := GatewayPlan{NetNS: GatewayOwned()}

	peerRanges := []netip.Prefix{host(PeerTunnelAddress(f.Role))}
	for _, m := range f.Remote {
		peerRanges = append(peerRanges, m.Real)
	}
	p.WireGuard = plan.WireGuard{
		PrivateKey:     f.PrivateKey,
		NextPrivateKey: f.NextPrivateKey,
		Peer: plan.WireGuardPeer{
			PublicKey:           f.PeerPublicKey,
			NextPublicKey:       f.PeerNextPublicKey,
			AllowedIPs:          peerRanges,
			PersistentKeepalive: f.Keepalive,
		},
	}
	if f.Role == gatewayrole.Server {
		p.WireGuard.ListenPort = f.ListenPort
	} else {
		p.WireGuard.Peer.Endpoint = f.Endpoint
	}
	if f.Standby {
		p.WireGuard.Peer = plan.WireGuardPeer{}
	}
	p.TunnelMTU = f.MTU
	p.Overlay.Kind, p.Overlay.Underlay = f.Overlay.Kind, f.Overlay.Address
	p.Routes = f.routing()
	p.NAT = f.ruleset(plan.IPv4)
	// The IPv6 table exists when the peer has IPv6 ranges: without them
	// WireGuard lets no IPv6 packet out of the tunnel in the first place.
	p.NAT6 = plan.Ruleset{Table: GatewayNFTable, Family: plan.IPv6}
	if f.hasRemote(plan.IPv6) {
		p.NAT6 = f.ruleset(plan.IPv6)
	}
	return p, nil
}

// routing plans the gateway's links, addresses, routes and rules, of both
// families alike.
func (f GatewayFacts) routing() plan.Routing {
	// The peer's pod range is often this cluster's own, so a peer pod may
	// have the very address of this gateway pod. Its packets must not be
	// dropped as martians on the way in (AcceptLocal), and the replies to
	// it, whose destination is that address once the SNAT is undone, must
	// go back into the tunnel rather than to this pod (LocalExceptIIF, in
	// GatewayOwned): nothing arriving on the overlay is for the gateway
	// itself.
	rs := GatewayOwned().Routes
	rs.Links = []plan.Link{
		{Name: TunnelLink, MTU: f.MTU, Router: true, AcceptLocal: true},
		{Name: OverlayLink, MTU: f.Overlay.MTU, Router: true},
	}
	rs.Addresses = []plan.Address{{Link: TunnelLink, Prefix: netip.PrefixFrom(TunnelAddress(f.Role), TunnelPrefix.Bits())}}
	// Whatever arrives from the overlay is for the peer: after the DNAT its
	// destination is in the peer's real ranges, and anything else, of
	// either family, is rejected rather than leaked through the pod's
	// default route.
	for _, m := range f.Remote {
		rs.Routes = append(rs.Routes, plan.Route{Table: TableToPeer, Dst: m.Real, Link: TunnelLink})
	}
	for _, fam := range families {
		rs.Routes = append(rs.Routes, plan.Route{Table: TableToPeer, Dst: everything(fam), Unreachable: true})
	}
	rs.Rules = append(rs.Rules, plan.PolicyRule{Priority: PriorityToPeer, IIF: OverlayLink, Table: TableToPeer})
	if n := f.Overlay.Node; n.IsValid() {
		// Each family the peer sends goes back to the node by the
		// overlay, whatever the family of the node's address (the route
		// applier finds a next hop of the route's family). A family the
		// peer has no range of is not routed at all, so that a gateway of
		// an IPv4 peering has nothing IPv6 to forward (which would need
		// IPv6 forwarding in its pod).
		rs.Neighbors = append(rs.Neighbors, plan.Neighbor{Link: OverlayLink, IP: n, MAC: plan.OverlayMAC(n)})
		for _, fam := range families {
			if f.hasRemote(fam) {
				rs.Routes = append(rs.Routes, plan.Route{
					Table: TableFromPeer, Dst: everything(fam),
					Link: OverlayLink, Via: n, Encap: n, VNI: plan.VNI,
				})
			}
		}
		rs.Rules = append(rs.Rules, plan.PolicyRule{Priority: PriorityFromPeer, IIF: TunnelLink, Table: TableFromPeer})
	}
	return rs.Sorted()
}

// hasPods tells whether this cluster has a pod range of family fam: a local
// range other than the external one.
func (f GatewayFacts) hasPods(fam plan.Family) bool {
	ext, _ := f.externalRange()
	return slices.ContainsFunc(f.LocalRanges, func(p netip.Prefix) bool { return p != ext && plan.FamilyOf(p.Addr()) == fam })
}

// hasRemote tells whether the peer has a range of family fam.
func (f GatewayFacts) hasRemote(fam plan.Family) bool {
	return slices.ContainsFunc(f.Remote, func(m RangeMapping) bool { return plan.FamilyOf(m.Real.Addr()) == fam })
}

// ruleset plans the gateway's nftables table of family fam: the same
// chains in both families, over the ranges and hosts of that family. The
// tunnel's own addresses, and so the rules of the health probe and the
// service exchange, are IPv4 only.
func (f GatewayFacts) ruleset(fam plan.Family) plan.Ruleset {
	rs := plan.Ruleset{Table: GatewayNFTable, Family: fam}
	toReal := plan.Map{Name: mapRemappedToReal}
	toRemapped := plan.Map{Name: mapRealToRemapped}
	var real []netip.Prefix
	for _, m := range f.Remote {
		if plan.FamilyOf(m.Real.Addr()) != fam {
			continue
		}
		real = append(real, m.Real)
		if m.Real == m.Remapped {
			continue
		}
		toReal.Elements = append(toReal.Elements, plan.MapElement{From: m.Remapped, To: m.Real})
		toRemapped.Elements = append(toRemapped.Elements, plan.MapElement{From: m.Real, To: m.Remapped})
	}
	toLocal := plan.Map{Name: mapIPToLocal}
	toIP := plan.Map{Name: mapLocalToIP}
	for _, m := range f.IPs {
		if plan.FamilyOf(m.Local) != fam {
			continue
		}
		local, remapped := host(m.Local), host(m.Remapped)
		toLocal.Elements = append(toLocal.Elements, plan.MapElement{From: remapped, To: local})
		toIP.Elements = append(toIP.Elements, plan.MapElement{From: local, To: remapped})
	}
	rs.Sets = []plan.Set{
		{Name: setPeerRanges, Prefixes: real},
		{Name: setLocalRanges, Prefixes: ofFamily(f.LocalRanges, fam)},
		{Name: setReachable, Prefixes: ofFamily(f.reachable(), fam)},
	}
	rs.Maps = []plan.Map{toReal, toRemapped, toLocal, toIP}
	rs.Counters = IngressDropReasons()
	postrouting := []plan.Rule{{
		Comment: "from the peer: real source to its remapped range",
		IIF:     TunnelLink, SNATMap: mapRealToRemapped,
	}, {
		Comment: "from this cluster: a remapped host as its address of the external range",
		IIF:     OverlayLink, SNATMap: mapLocalToIP,
	}}
	if u := f.UnknownSource; u.IsValid() && plan.FamilyOf(u) == fam {
		// A node's own packets come with the node's address, which no
		// peer knows. They are translated here, whichever node sent them,
		// so that the answers come back to this gateway, which sends them
		// through the overlay to that node: a node other than the
		// gateway's, were it to translate them itself, could not have
		// them back (every node would send as the same address), and the
		// gateway's node cannot take them on their way, since its strict
		// reverse-path filter drops what comes out of the overlay from
		// another node's address.
		postrouting = append(postrouting, plan.Rule{
			Comment: "from this cluster: other sources (nodes, host-network pods) as the unknown source",
			IIF:     OverlayLink, SrcNotIn: setLocalRanges, SNATTo: u,
		})
	}
	// The tunnel is a narrow door: before routing and before the source is
	// remapped, a packet from the peer must come from the peer's declared
	// ranges and go to this cluster's pods or external range. Nothing else
	// of this cluster (its nodes, Services, other peers, the gateway pod
	// itself but for the health probe) is reachable from the tunnel.
	var ingress []plan.Rule
	if fam == plan.FamilyOf(TunnelAddress(f.Role)) {
		ingress = []plan.Rule{{
			Comment: "from the peer: its health probe to this gateway",
			IIF:     TunnelLink, Src: PeerTunnelAddress(f.Role), Dst: TunnelAddress(f.Role), UDPDstPort: HealthPort,
			Verdict: plan.Accept,
		}, {
			Comment: "from the peer: the service exchange with this gateway",
			IIF:     TunnelLink, Src: PeerTunnelAddress(f.Role), Dst: TunnelAddress(f.Role), TCPDstPort: ServicesPort,
			Verdict: plan.Accept,
		}, {
			Comment: "from the peer: answers to what this gateway opened",
			IIF:     TunnelLink, Src: PeerTunnelAddress(f.Role), Dst: TunnelAddress(f.Role), Established: true,
			Verdict: plan.Accept,
		}}
	}
	ingress = append(ingress, plan.Rule{
		Comment: "from the peer: only from its declared ranges",
		IIF:     TunnelLink, SrcNotIn: setPeerRanges, Counter: DropSource, Verdict: plan.Drop,
	}, plan.Rule{
		Comment: "from the peer: nothing for the gateway itself",
		IIF:     TunnelLink, DstLocal: true, Counter: DropGateway, Verdict: plan.Drop,
	}, plan.Rule{
		Comment: "from the peer: only to this cluster's pods, remapped hosts and unknown source",
		IIF:     TunnelLink, DstNotIn: setReachable, Counter: DropDestination, Verdict: plan.Drop,
	})
	mss := uint16(f.clampMTU() - tcpIPHeaders(fam))
	rs.Chains = []plan.Chain{
		{Name: "ingress", Type: plan.Filter, Hook: plan.Prerouting, Priority: -150, Rules: ingress},
		{Name: "prerouting", Type: plan.NAT, Hook: plan.Prerouting, Priority: -100, Rules: []plan.Rule{{
			Comment: "to the peer: remapped destination to its real range",
			IIF:     OverlayLink, DNATMap: mapRemappedToReal,
		}, {
			Comment: "from the peer: a remapped host's address to its real one",
			IIF:     TunnelLink, DNATMap: mapIPToLocal,
		}}},
		{Name: "postrouting", Type: plan.NAT, Hook: plan.Postrouting, Priority: 100, Rules: postrouting},
		{Name: "forward", Type: plan.Filter, Hook: plan.Forward, Priority: -150, Rules: []plan.Rule{
			{Comment: "clamp MSS into the tunnel", OIF: TunnelLink, TCPSYN: true, ClampMSS: mss},
			{Comment: "clamp MSS out of the tunnel", IIF: TunnelLink, TCPSYN: true, ClampMSS: mss},
		}},
	}
	return rs
}

// reachable are the destinations a packet from the tunnel may have: the
// pod ranges, and of the external range only the unknown source (the
// answers to the nodes) and the remapped hosts; the whole external range
// would let the peer's packets out to wherever the gateway's node routes
// it. Without an unknown source the external range is not known, and every
// local range is reachable.
func (f GatewayFacts) reachable() []netip.Prefix {
	ext, ok := f.externalRange()
	if !ok {
		return f.LocalRanges
	}
	out := []netip.Prefix{host(f.UnknownSource)}
	for _, p := range f.LocalRanges {
		if p != ext {
			out = append(out, p)
		}
	}
	for _, m := range f.IPs {
		out = append(out, host(m.Remapped))
	}
	return out
}

// externalRange is the local range holding the unknown source.
func (f GatewayFacts) externalRange() (netip.Prefix, bool) {
	if !f.UnknownSource.IsValid() {
		return netip.Prefix{}, false
	}
	i := slices.IndexFunc(f.LocalRanges, func(p netip.Prefix) bool { return p.Contains(f.UnknownSource) })
	if i < 0 {
		return netip.Prefix{}, false
	}
	return f.LocalRanges[i], true
}

// clampMTU is the packet size TCP is clamped to: the tunnel's MTU, or the
// path's when it was measured smaller, but never below the smallest MTU
// IPv4 hosts must take (a path narrower than that is broken for TCP too).
func (f GatewayFacts) clampMTU() int {
	if f.PathMTU > 0 && f.PathMTU < f.MTU {
		return max(f.PathMTU, minMTU)
	}
	return f.MTU
}

// Tunnel MTU bounds, the API's (networking/v1beta1 MinMTU, MaxMTU): the
// planner does not import the API, a test checks they agree.
const (
	minMTU = 576
	maxMTU = 9000
)

func (f GatewayFacts) validate() error {
	var errs []error
	if !f.Role.Valid() {
		errs = append(errs, fmt.Errorf("role %q: must be server or client", f.Role))
	}
	if f.PrivateKey == (plan.Key{}) {
		errs = append(errs, errors.New("private key: missing"))
	}
	if f.PeerPublicKey == (plan.Key{}) {
		errs = append(errs, errors.New("peer public key: missing"))
	}
	if f.NextPrivateKey != (plan.Key{}) && f.NextPrivateKey.PublicKey() == f.PrivateKey.PublicKey() {
		errs = append(errs, errors.New("next private key: the same key pair as the current one"))
	}
	if f.PeerNextPublicKey != (plan.Key{}) && f.PeerNextPublicKey == f.PeerPublicKey {
		errs = append(errs, errors.New("peer next public key: the same as the current one"))
	}
	if f.Role == gatewayrole.Server && (f.ListenPort < 1 || f.ListenPort > 65535) {
		errs = append(errs, fmt.Errorf("listen port %d: must be in 1-65535", f.ListenPort))
	}
	if f.MTU < minMTU || f.MTU > maxMTU {
		errs = append(errs, fmt.Errorf("tunnel MTU %d: must be in %d-%d", f.MTU, minMTU, maxMTU))
	}
	if f.PathMTU < 0 {
		errs = append(errs, fmt.Errorf("path MTU %d: must not be negative", f.PathMTU))
	}
	if f.Keepalive < 0 {
		errs = append(errs, fmt.Errorf("keepalive %v: must not be negative", f.Keepalive))
	}
	if f.Overlay.Kind != plan.Geneve && f.Overlay.Kind != plan.VXLAN {
		errs = append(errs, fmt.Errorf("overlay kind %q: must be geneve or vxlan", f.Overlay.Kind))
	}
	if !f.Overlay.Address.IsValid() {
		errs = append(errs, errors.New("overlay address: missing"))
	}
	if n := f.Overlay.Node; n.IsValid() && plan.FamilyOf(n) != plan.FamilyOf(f.Overlay.Address) {
		errs = append(errs, fmt.Errorf("overlay node address %v: must be of the family of the overlay address %v", n, f.Overlay.Address))
	}
	if f.Overlay.MTU < minMTU {
		errs = append(errs, fmt.Errorf("overlay MTU %d: must be at least %d", f.Overlay.MTU, minMTU))
	}
	if f.hasRemote(plan.IPv6) && (f.MTU < minIPv6MTU || f.Overlay.MTU < minIPv6MTU) {
		errs = append(errs, fmt.Errorf("tunnel MTU %d, overlay MTU %d: the peer has IPv6 ranges, which need links of at least %d", f.MTU, f.Overlay.MTU, minIPv6MTU))
	}
	errs = append(errs, validateRemote(f.Remote)...)
	errs = append(errs, validateLocal(f.LocalRanges)...)
	if u := f.UnknownSource; u.IsValid() && !slices.ContainsFunc(f.LocalRanges, func(p netip.Prefix) bool { return p.Contains(u) }) {
		errs = append(errs, fmt.Errorf("unknown-source address %v: must be an address of the local ranges", u))
	}
	errs = append(errs, f.validateIPs()...)
	return errors.Join(errs...)
}

// validateIPs checks the remapped hosts: at most MaxIPs, each remapped to
// its own address of the external range but the unknown source, from an
// address outside the local ranges.
func (f GatewayFacts) validateIPs() []error {
	if len(f.IPs) == 0 {
		return nil
	}
	ext, ok := f.externalRange()
	if !ok {
		return []error{errors.New("remapped hosts: need the unknown-source address, which tells the external range")}
	}
	var errs []error
	if len(f.IPs) > MaxIPs {
		errs = append(errs, fmt.Errorf("remapped hosts: %d, at most %d", len(f.IPs), MaxIPs))
	}
	seen := map[netip.Addr]bool{}
	for i, m := range f.IPs {
		where := fmt.Sprintf("remapped host %d (%s -> %s)", i, m.Local, m.Remapped)
		switch {
		case !m.Local.IsValid() || slices.ContainsFunc(f.LocalRanges, func(p netip.Prefix) bool { return p.Contains(m.Local) }):
			errs = append(errs, fmt.Errorf("%s: the local address must lie outside the local ranges", where))
		case !ext.Contains(m.Remapped) || m.Remapped == f.UnknownSource:
			errs = append(errs, fmt.Errorf("%s: the remapped address must be in the external range %s, not the unknown source", where, ext))
		case seen[m.Remapped]:
			errs = append(errs, fmt.Errorf("%s: the remapped address is another host's", where))
		}
		seen[m.Remapped] = true
	}
	return errs
}

// validateLocal checks the local ranges: without them the ingress filter
// would let nothing in, and an open filter is not an option.
func validateLocal(local []netip.Prefix) []error {
	if len(local) == 0 {
		return []error{errors.New("local ranges: missing (this cluster's pod and external CIDRs)")}
	}
	var errs []error
	for i, p := range local {
		if !p.IsValid() || p != p.Masked() {
			errs = append(errs, fmt.Errorf("local range %d (%s): must be a network", i, p))
		}
	}
	if i, j, ok := cidr.FirstOverlap(local); ok {
		errs = append(errs, fmt.Errorf("local ranges %s and %s overlap", local[i], local[j]))
	}
	return errs
}

func validateRemote(remote []RangeMapping) []error {
	var errs []error
	var real, remapped []netip.Prefix
	for i, m := range remote {
		where := fmt.Sprintf("remote range %d (%s -> %s)", i, m.Real, m.Remapped)
		switch {
		case !m.Real.IsValid() || !m.Remapped.IsValid():
			errs = append(errs, fmt.Errorf("%s: real and remapped ranges are both required", where))
		case plan.FamilyOf(m.Real.Addr()) != plan.FamilyOf(m.Remapped.Addr()):
			errs = append(errs, fmt.Errorf("%s: a range is remapped within its family", where))
		case m.Real != m.Real.Masked() || m.Remapped != m.Remapped.Masked():
			errs = append(errs, fmt.Errorf("%s: host bits set", where))
		case m.Real.Bits() != m.Remapped.Bits():
			errs = append(errs, fmt.Errorf("%s: a remapped range must have the length of the real one", where))
		}
		real = append(real, m.Real)
		remapped = append(remapped, m.Remapped)
	}
	if i, j, ok := cidr.FirstOverlap(real); ok {
		errs = append(errs, fmt.Errorf("remote ranges %s and %s overlap", real[i], real[j]))
	}
	if i, j, ok := cidr.FirstOverlap(remapped); ok {
		errs = append(errs, fmt.Errorf("remapped ranges %s and %s overlap", remapped[i], remapped[j]))
	}
	return errs
}
