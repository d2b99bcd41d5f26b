package dataplane

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/internal/rangepolicy"
)

// FabricFacts are what a fabric agent knows about its node and the active
// gateways of the cluster.
type FabricFacts struct {
	// Node is the node's own address, where gateways and other nodes send
	// it overlay packets; it names the overlay link's MAC address.
	Node netip.Addr
	// OverlayKind is the encapsulation of the cluster's overlay.
	OverlayKind plan.OverlayKind
	// OverlayMTU is the MTU of the overlay link.
	OverlayMTU int
	// PodCIDRs are the cluster's pod ranges: their sources keep their
	// address towards peers.
	PodCIDRs []netip.Prefix
	// UnknownSource is the address other sources are translated to: the
	// first address of the cluster's external CIDR.
	UnknownSource netip.Addr
	// Gateways are the active gateway pods, one per peer, and the peers
	// that have none at the moment.
	Gateways []FabricGateway
	// Nodes are the cluster's nodes, this one among them or not: where
	// each node's pods are.
	Nodes []FabricNode
	// Masquerade are the real addresses of the remapped hosts whose IP
	// asks for masquerade: what a peer sends them leaves the gateway's
	// node with the node's address, so that they answer the node whatever
	// their routes. At most MaxIPs are planned, the lowest.
	Masquerade []netip.Addr
}

// FabricNode is a node of the cluster and its part of the pod ranges.
type FabricNode struct {
	// Address is the node's address, where its overlay link listens.
	Address netip.Addr
	// PodCIDRs are the node's pod ranges: its spec.podCIDRs, or those its
	// CNI keeps for it where it has none.
	PodCIDRs []netip.Prefix
}

// FabricGateway is an active gateway pod and the ranges of its peer.
type FabricGateway struct {
	// Name identifies the gateway in errors and comments (namespace/name).
	Name string
	// Address is the gateway pod's address. The zero Addr means the peer
	// has no active gateway pod at the moment (it is being replaced, or not
	// created yet): its ranges then end at the node, rather than go to the
	// node's default route and out to the underlay.
	Address netip.Addr
	// HandingOver, without an Address, says the peer had an active pod
	// moments ago (HandOverGrace): its ranges drop packets silently, so
	// that the connections caught in a hand-over of the Lease send them
	// again to the next active pod instead of failing on an unreachable
	// route's ICMP error. Otherwise they are unreachable: a lasting gap
	// fails a connection at once.
	HandingOver bool
	// Node is the address of the node running the gateway pod.
	Node netip.Addr
	// Local is true when the gateway pod runs on this node.
	Local bool
	// Ranges are the peer's ranges as this cluster sees them (remapped).
	Ranges []netip.Prefix
}

// SkippedGateway is a gateway PlanFabric left out, and why.
type SkippedGateway struct {
	// Name is the gateway's Name.
	Name string
	// Reason says what was wrong with it.
	Reason string
}

// FabricPlan is the desired state of a node.
type FabricPlan struct {
	// Skipped are the gateways left out of the plan: one peer's bad facts
	// (a range on this cluster's pods or on another peer's, a special-use
	// range)
	// cost that peer its routes, never the other peers theirs.
	Skipped []SkippedGateway
	plan.NetNS
}

// FabricOwned is the part of every fabric plan that its facts do not
// change: the names of its overlay link and nftables table, and the routing
// tables and rule priorities it owns. It is what a fabric agent removes when
// it is told to clean up.
func FabricOwned() plan.NetNS {
	return owned(FabricNFTable, []int{TablePodSources, TableHostSources, TableOtherNodes},
		[]int{PriorityPodSources, PriorityHostSource, PriorityOtherNodes})
}

// Names of the fabric's nftables sets.
const (
	setPodCIDRs     = "pod_cidrs"
	setRemoteRanges = "remote_ranges"
	setHomeRanges   = "home_ranges"
	setOtherPods    = "other_node_pods"
	setOtherNodes   = "other_nodes"
	setMasquerade   = "masquerade_hosts"
)

// FabricRawPriority runs the fabric's notrack rule before connection
// tracking (-200), as the raw table does.
const FabricRawPriority = -300

// HandOverGrace is how long after a peer's active gateway pod went a
// node still expects the next one (FabricGateway.HandingOver): above a
// failover's time when the active pod's node is lost (the Lease's 4 s, then
// the label and the sync), and above a one-replica gateway's replacement.
const HandOverGrace = 10 * time.Second

// FabricNATPriority runs the fabric's source NAT just before the CNIs'
// (iptables' nat POSTROUTING is at 100): netfilter consults no later NAT
// chain for a connection once one has set up a binding, so the identity SNAT
// bypasses the CNI's masquerade.
const FabricNATPriority = 99

// PlanFabric computes the desired state of a node from its facts. Gateways
// with no ranges yet (their Configuration is not remapped) get no routes;
// the ranges of a peer without a gateway pod get unreachable routes. It
// fails only on the node's own facts: a gateway whose facts are wrong is
// left out and reported in Skipped, the others are planned.
func PlanFabric(f FabricFacts) (FabricPlan, error) {
	if err := f.validate(); err != nil {
		return FabricPlan{}, err
	}
	gws := slices.Clone(f.Gateways)
	slices.SortFunc(gws, func(a, b FabricGateway) int { return cmp.Compare(a.Name, b.Name) })
	// A family this cluster has no pods of is not peered: its ranges are
	// left out before the checks, which would cost the peer its other
	// family too.
	for i := range gws {
		gws[i].Ranges = slices.DeleteFunc(slices.Clone(gws[i].Ranges), func(r netip.Prefix) bool {
			return r.IsValid() && len(ofFamily(f.PodCIDRs, plan.FamilyOf(r.Addr()))) == 0
		})
	}

	p := FabricPlan{NetNS: FabricOwned()}
	p.Overlay.Kind, p.Overlay.Underlay = f.OverlayKind, f.Node
	// Gateways are checked in name order: of two whose ranges overlap,
	// the first keeps its routes.
	var planned []netip.Prefix
	gws = slices.DeleteFunc(gws, func(g FabricGateway) bool {
		if err := f.checkGateway(g, planned); err != nil {
			p.Skipped = append(p.Skipped, SkippedGateway{Name: g.Name, Reason: err.Error()})
			return true
		}
		planned = append(planned, g.Ranges...)
		return false
	})
	rs := p.Routes
	rs.Links = []plan.Link{{Name: OverlayLink, MTU: f.OverlayMTU, Router: true}}
	neighbors := map[netip.Addr]bool{}
	neighbor := func(a netip.Addr) {
		if !neighbors[a] {
			neighbors[a] = true
			rs.Neighbors = append(rs.Neighbors, plan.Neighbor{Link: OverlayLink, IP: a, MAC: plan.OverlayMAC(a)})
		}
	}
	via := func(table int, dst netip.Prefix, to netip.Addr) plan.Route {
		return plan.Route{Table: table, Dst: dst, Link: OverlayLink, Via: to, Encap: to, VNI: plan.VNI}
	}
	var remote, home []netip.Prefix
	for _, g := range gws {
		if !g.Address.IsValid() {
			for _, r := range g.Ranges {
				for _, table := range []int{TablePodSources, TableHostSources} {
					rs.Routes = append(rs.Routes, plan.Route{Table: table, Dst: r, Unreachable: !g.HandingOver, Blackhole: g.HandingOver})
				}
			}
			continue
		}
		if len(g.Ranges) == 0 {
			continue
		}
		neighbor(g.Address)
		// Other sources go to the gateway pod too: the gateway's node
		// translates its own to the unknown-source address on the way
		// (below), the gateway pod those of the other nodes, which come
		// straight from them. Through the gateway's node they would not
		// pass: its strict reverse-path filter drops what comes out of the
		// overlay from another node's address.
		for _, r := range g.Ranges {
			rs.Routes = append(rs.Routes, via(TablePodSources, r, g.Address), via(TableHostSources, r, g.Address))
			remote = append(remote, r)
			if g.Local {
				home = append(home, r)
			}
		}
	}
	// Replies of peers to a pod of another node leave the gateway's pod
	// through the overlay to this node, the gateway's; they go on through
	// the overlay to the pod's node, where the pod's packets towards the
	// peer left by the overlay: a node with strict reverse-path filtering
	// accepts them only there, and its connection tracking, which saw the
	// pod's first packet, recognises them.
	otherPods := f.otherNodePods()
	for _, n := range otherPods {
		neighbor(n.node)
		rs.Routes = append(rs.Routes, via(TableOtherNodes, n.pods, n.node))
	}
	// The same for the replies to other nodes themselves (their own
	// traffic and their host-network pods'), which the gateway pod
	// translated back to the node's address: they arrive where the node's
	// packets to the peer left, by the overlay.
	otherNodes := f.otherNodes()
	for _, n := range otherNodes {
		neighbor(n.Addr())
		rs.Routes = append(rs.Routes, via(TableOtherNodes, n, n.Addr()))
	}
	for _, pod := range f.PodCIDRs {
		rs.Rules = append(rs.Rules, plan.PolicyRule{Priority: PriorityPodSources, Src: pod, Table: TablePodSources})
	}
	rs.Rules = append(rs.Rules,
		plan.PolicyRule{Priority: PriorityHostSource, Table: TableHostSources},
		plan.PolicyRule{Priority: PriorityOtherNodes, IIF: OverlayLink, Table: TableOtherNodes})
	p.Routes = rs.Sorted()
	var otherPrefixes []netip.Prefix
	for _, n := range otherPods {
		otherPrefixes = append(otherPrefixes, n.pods)
	}
	sets := []plan.Set{
		{Name: setPodCIDRs, Prefixes: f.PodCIDRs},
		{Name: setRemoteRanges, Prefixes: remote},
		{Name: setHomeRanges, Prefixes: home},
		{Name: setOtherPods, Prefixes: otherPrefixes},
		{Name: setOtherNodes, Prefixes: otherNodes},
		{Name: setMasquerade, Prefixes: f.masquerade()},
	}
	p.NAT = f.ruleset(plan.IPv4, sets)
	// The IPv6 table exists when a peer has IPv6 ranges: it is all about
	// the traffic to and from peers.
	p.NAT6 = plan.Ruleset{Table: FabricNFTable, Family: plan.IPv6}
	if len(ofFamily(remote, plan.IPv6)) > 0 {
		p.NAT6 = f.ruleset(plan.IPv6, sets)
	}
	return p, nil
}

// ruleset plans the node's nftables table of family fam over the part of
// sets of that family. The rules that translate to one of the node's own
// addresses are in the table of that address's family only.
func (f FabricFacts) ruleset(fam plan.Family, sets []plan.Set) plan.Ruleset {
	rs := plan.Ruleset{Table: FabricNFTable, Family: fam}
	for _, s := range sets {
		rs.Sets = append(rs.Sets, plan.Set{Name: s.Name, Prefixes: ofFamily(s.Prefixes, fam)})
	}
	var postrouting []plan.Rule
	if plan.FamilyOf(f.Node) == fam {
		// Only the gateway's node sees these: its gateway pod sends what
		// comes out of the tunnel to it.
		postrouting = append(postrouting, plan.Rule{
			Comment: "peers' packets to a masqueraded remapped host, as this node",
			IIF:     OverlayLink, DstIn: setMasquerade, SNATTo: f.Node,
		})
	}
	if plan.FamilyOf(f.UnknownSource) == fam {
		postrouting = append(postrouting, plan.Rule{
			Comment:  "other sources leave through this node's gateway as the unknown source",
			SrcNotIn: setPodCIDRs, DstIn: setHomeRanges, SNATTo: f.UnknownSource,
		})
	}
	postrouting = append(postrouting, plan.Rule{
		Comment: "keep sources towards peers, bypassing the CNI's masquerade",
		DstIn:   setRemoteRanges, SNATKeepSource: true,
	})
	rs.Chains = []plan.Chain{{
		Name: "prerouting", Type: plan.Filter, Hook: plan.Prerouting, Priority: FabricRawPriority,
		Rules: []plan.Rule{{
			// This node saw such a connection only as overlay packets
			// to the gateway: tracked, its replies would be invalid here
			// (kube-proxy drops those) and masqueraded by a CNI.
			Comment: "peers' packets passing through to pods of other nodes",
			IIF:     OverlayLink, DstIn: setOtherPods, Notrack: true,
		}, {
			Comment: "peers' answers passing through to other nodes",
			IIF:     OverlayLink, DstIn: setOtherNodes, Notrack: true,
		}},
	}, {
		Name: "postrouting", Type: plan.NAT, Hook: plan.Postrouting, Priority: FabricNATPriority,
		Rules: postrouting,
	}}
	return rs
}

// masquerade are the hosts to masquerade towards as host prefixes:
// addresses of the node's family outside the pod CIDRs, at most MaxIPs, the
// lowest. Others can only be an IP gone wrong, which its gateway does not
// translate either, or a host this node cannot masquerade towards.
func (f FabricFacts) masquerade() []netip.Prefix {
	hosts := slices.Clone(f.Masquerade)
	slices.SortFunc(hosts, netip.Addr.Compare)
	hosts = slices.Compact(hosts)
	var out []netip.Prefix
	for _, h := range hosts {
		if len(out) == MaxIPs {
			break
		}
		if plan.FamilyOf(h) == plan.FamilyOf(f.Node) && !slices.ContainsFunc(f.PodCIDRs, func(c netip.Prefix) bool { return c.Contains(h) }) {
			out = append(out, host(h))
		}
	}
	return out
}

// nodePods is one pod range of another node.
type nodePods struct {
	node netip.Addr
	pods netip.Prefix
}

// otherNodePods are the pod ranges, of either family, of the nodes other
// than this one whose address is of this node's family (the overlay's). A
// range that is no network, lies outside the cluster's pod CIDRs or overlaps
// one taken before is left out: it can only be a node's record gone wrong,
// and the overlay is not where to repair it.
func (f FabricFacts) otherNodePods() []nodePods {
	nodes := slices.Clone(f.Nodes)
	slices.SortFunc(nodes, func(a, b FabricNode) int { return a.Address.Compare(b.Address) })
	var out []nodePods
	var taken []netip.Prefix
	for _, n := range nodes {
		if plan.FamilyOf(n.Address) != plan.FamilyOf(f.Node) || n.Address == f.Node {
			continue
		}
		for _, p := range n.PodCIDRs {
			inside := slices.ContainsFunc(f.PodCIDRs, func(c netip.Prefix) bool { return c.Bits() <= p.Bits() && c.Contains(p.Addr()) })
			if !p.IsValid() || p != p.Masked() || !inside || slices.ContainsFunc(taken, p.Overlaps) {
				continue
			}
			taken = append(taken, p)
			out = append(out, nodePods{node: n.Address, pods: p})
		}
	}
	return out
}

// otherNodes are the addresses of the nodes other than this one, as host
// prefixes. An address of another family than this node's, or in the
// cluster's pod CIDRs, is left out, as otherNodePods leaves out what can
// only be a record gone wrong.
func (f FabricFacts) otherNodes() []netip.Prefix {
	var out []netip.Prefix
	for _, n := range f.Nodes {
		a := n.Address
		if plan.FamilyOf(a) != plan.FamilyOf(f.Node) || a == f.Node || slices.ContainsFunc(f.PodCIDRs, func(c netip.Prefix) bool { return c.Contains(a) }) {
			continue
		}
		if p := host(a); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}

func (f FabricFacts) validate() error {
	var errs []error
	if !f.Node.IsValid() {
		errs = append(errs, errors.New("node address: missing"))
	}
	if f.OverlayKind != plan.Geneve && f.OverlayKind != plan.VXLAN {
		errs = append(errs, fmt.Errorf("overlay kind %q: must be geneve or vxlan", f.OverlayKind))
	}
	if f.OverlayMTU < minMTU {
		errs = append(errs, fmt.Errorf("overlay MTU %d: must be at least %d", f.OverlayMTU, minMTU))
	}
	if len(f.PodCIDRs) == 0 {
		errs = append(errs, errors.New("pod CIDRs: at least one is required"))
	}
	for _, p := range f.PodCIDRs {
		if !p.IsValid() || p != p.Masked() {
			errs = append(errs, fmt.Errorf("pod CIDR %s: must be a network", p))
		}
	}
	if !f.UnknownSource.IsValid() {
		errs = append(errs, errors.New("unknown-source address: missing"))
	}
	return errors.Join(errs...)
}

// checkGateway reports what makes a gateway unfit to be planned, given the
// ranges of the gateways planned before it.
func (f FabricFacts) checkGateway(g FabricGateway, planned []netip.Prefix) error {
	var errs []error
	underlay := plan.FamilyOf(f.Node)
	if g.Address.IsValid() && plan.FamilyOf(g.Address) != underlay {
		errs = append(errs, fmt.Errorf("address %v must be of the family of the node's address %v", g.Address, f.Node))
	}
	if g.Address.IsValid() && !g.Local && (!g.Node.IsValid() || plan.FamilyOf(g.Node) != underlay) {
		errs = append(errs, fmt.Errorf("node address %v must be of the family of this node's address %v", g.Node, f.Node))
	}
	for _, r := range g.Ranges {
		if !r.IsValid() || r != r.Masked() {
			errs = append(errs, fmt.Errorf("range %s must be a network", r))
			continue
		}
		if plan.FamilyOf(r.Addr()) == plan.IPv6 && f.OverlayMTU < minIPv6MTU {
			errs = append(errs, fmt.Errorf("range %s: the overlay's MTU %d is below IPv6's %d", r, f.OverlayMTU, minIPv6MTU))
		}
		if err := rangepolicy.CheckRoutable(r); err != nil {
			errs = append(errs, err)
		}
		// Pod CIDRs are few: a direct check names the pair.
		for _, pod := range f.PodCIDRs {
			if r.Overlaps(pod) {
				errs = append(errs, fmt.Errorf("range %s overlaps pod CIDR %s", r, pod))
			}
		}
		for _, q := range planned {
			if r.Overlaps(q) {
				errs = append(errs, fmt.Errorf("range %s overlaps %s of another gateway", r, q))
			}
		}
	}
	if i, j, ok := cidr.FirstOverlap(g.Ranges); ok {
		errs = append(errs, fmt.Errorf("ranges %s and %s overlap", g.Ranges[i], g.Ranges[j]))
	}
	return errors.Join(errs...)
}
