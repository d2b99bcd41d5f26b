package dataplane

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/internal/rangepolicy"
)

// fabricFactsFile is the JSON form of FabricFacts in the golden cases.
type fabricFactsFile struct {
	Node          string   `json:"node"`
	OverlayKind   string   `json:"overlayKind"`
	OverlayMTU    int      `json:"overlayMTU"`
	PodCIDRs      []string `json:"podCIDRs"`
	UnknownSource string   `json:"unknownSource"`
	Gateways      []struct {
		Name    string   `json:"name"`
		Address string   `json:"address"`
		Node    string   `json:"node"`
		Local   bool     `json:"local"`
		Ranges  []string `json:"ranges"`
		// HandingOver, for a gateway without an address, is optional.
		HandingOver bool `json:"handingOver"`
	} `json:"gateways"`
	Nodes []struct {
		Address  string   `json:"address"`
		PodCIDRs []string `json:"podCIDRs"`
	} `json:"nodes"`
	// Masquerade, the hosts to masquerade towards, is optional.
	Masquerade []string `json:"masquerade"`
}

func (j fabricFactsFile) facts() FabricFacts {
	f := FabricFacts{
		Node:          netip.MustParseAddr(j.Node),
		OverlayKind:   plan.OverlayKind(j.OverlayKind),
		OverlayMTU:    j.OverlayMTU,
		UnknownSource: netip.MustParseAddr(j.UnknownSource),
	}
	for _, p := range j.PodCIDRs {
		f.PodCIDRs = append(f.PodCIDRs, netip.MustParsePrefix(p))
	}
	for _, h := range j.Masquerade {
		f.Masquerade = append(f.Masquerade, netip.MustParseAddr(h))
	}
	for _, g := range j.Gateways {
		// A gateway without an address stands for a peer without a pod.
		fg := FabricGateway{Name: g.Name, Local: g.Local, HandingOver: g.HandingOver}
		if g.Address != "" {
			fg.Address, fg.Node = netip.MustParseAddr(g.Address), netip.MustParseAddr(g.Node)
		}
		for _, r := range g.Ranges {
			fg.Ranges = append(fg.Ranges, netip.MustParsePrefix(r))
		}
		f.Gateways = append(f.Gateways, fg)
	}
	for _, n := range j.Nodes {
		fn := FabricNode{Address: netip.MustParseAddr(n.Address)}
		for _, p := range n.PodCIDRs {
			fn.PodCIDRs = append(fn.PodCIDRs, netip.MustParsePrefix(p))
		}
		f.Nodes = append(f.Nodes, fn)
	}
	return f
}

// nodeFacts are the facts of a node without gateways.
func nodeFacts() FabricFacts {
	return FabricFacts{
		Node: netip.MustParseAddr("172.18.0.2"), OverlayKind: plan.VXLAN, OverlayMTU: 1450,
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, UnknownSource: netip.MustParseAddr("10.70.0.1"),
	}
}

// TestPlanFabricSkipsBadGateways gives PlanFabric one good gateway beside
// a bad one: the bad one is skipped, named with its reason, and the good
// one keeps its routes. Only the node's own facts fail the plan.
func TestPlanFabricSkipsBadGateways(t *testing.T) {
	base := nodeFacts()
	base.PodCIDRs = append(base.PodCIDRs, netip.MustParsePrefix("fd44::/48"))
	gw := func(name string, ranges ...string) FabricGateway {
		g := FabricGateway{Name: name, Address: netip.MustParseAddr("10.244.0.10"), Local: true}
		for _, r := range ranges {
			g.Ranges = append(g.Ranges, netip.MustParsePrefix(r))
		}
		return g
	}
	good := gw("a", "10.71.0.0/16")
	for name, tc := range map[string]struct {
		bad  FabricGateway
		want string
	}{
		"two peers, one range":  {gw("b", "10.71.0.0/24"), "range 10.71.0.0/24 overlaps 10.71.0.0/16 of another gateway"},
		"range in pod CIDR":     {gw("b", "10.244.5.0/24"), "range 10.244.5.0/24 overlaps pod CIDR 10.244.0.0/16"},
		"IPv6 link-local range": {gw("b", "fe80::/64"), "fe80::/64 refused"},
		"link-local range":      {gw("b", "169.254.0.0/16"), "169.254.0.0/16 refused (SpecialUse)"},
		"default route":         {gw("b", "0.0.0.0/0"), "0.0.0.0/0 refused (SpecialUse)"},
		"host bits":             {gw("b", "10.72.0.1/16"), "range 10.72.0.1/16 must be a network"},
		"own ranges overlap":    {gw("b", "10.72.0.0/16", "10.72.3.0/24"), "ranges 10.72.0.0/16 and 10.72.3.0/24 overlap"},
		"IPv6 address":          {FabricGateway{Name: "b", Address: netip.MustParseAddr("fd00::1"), Local: true}, "address fd00::1 must be of the family of the node's address 172.18.0.2"},
		"remote gateway, no node": {FabricGateway{Name: "b", Address: netip.MustParseAddr("10.244.3.9"),
			Ranges: []netip.Prefix{netip.MustParsePrefix("10.73.0.0/16")}}, "node address invalid IP must be of the family"},
	} {
		f := base
		f.Gateways = []FabricGateway{tc.bad, good}
		p, err := PlanFabric(f)
		if err != nil {
			t.Errorf("%s: PlanFabric = %v, want the good gateway planned", name, err)
			continue
		}
		if len(p.Skipped) != 1 || p.Skipped[0].Name != "b" || !strings.Contains(p.Skipped[0].Reason, tc.want) {
			t.Errorf("%s: skipped %+v, want gateway b with %q", name, p.Skipped, tc.want)
		}
		routed := false
		for _, r := range p.Routes.Routes {
			if r.Dst == good.Ranges[0] && !r.Unreachable {
				routed = true
			}
			for _, br := range tc.bad.Ranges {
				if r.Dst == br {
					t.Errorf("%s: the skipped gateway's range %s is routed", name, br)
				}
			}
		}
		if !routed {
			t.Errorf("%s: the good gateway's range is not routed", name)
		}
	}
	f := base
	f.PodCIDRs = nil
	if _, err := PlanFabric(f); err == nil || !strings.Contains(err.Error(), "pod CIDRs") {
		t.Errorf("PlanFabric without pod CIDRs: %v", err)
	}
}

// TestPlanFabricFamiliesWithoutPods gives an IPv4-only node a peer with
// ranges of both families: the IPv4 ones are routed, the IPv6 one is left
// out without costing the peer its IPv4 routes, and no ip6 table is
// planned.
func TestPlanFabricFamiliesWithoutPods(t *testing.T) {
	f := nodeFacts()
	f.Gateways = []FabricGateway{{Name: "b", Address: netip.MustParseAddr("10.244.0.10"), Local: true,
		Ranges: []netip.Prefix{netip.MustParsePrefix("10.71.0.0/16"), netip.MustParsePrefix("fd00:71::/48")}}}
	p, err := PlanFabric(f)
	if err != nil || len(p.Skipped) != 0 {
		t.Fatalf("PlanFabric = %v, skipped %v", err, p.Skipped)
	}
	var routed []netip.Prefix
	for _, r := range p.Routes.Routes {
		if r.Table == TablePodSources {
			routed = append(routed, r.Dst)
		}
	}
	if want := []netip.Prefix{netip.MustParsePrefix("10.71.0.0/16")}; !slices.Equal(routed, want) {
		t.Errorf("routed %v, want %v", routed, want)
	}
	if !p.NAT6.Empty() {
		t.Errorf("an ip6 table is planned: %s", p.NAT6)
	}
}

// FuzzPlanFabric plans a node with gateways of arbitrary ranges: it never
// fails on them, and never routes a range that is no network, overlaps the
// pod CIDRs or a special-use range, or overlaps another routed range.
func FuzzPlanFabric(f *testing.F) {
	f.Add("10.71.0.0/16", "10.72.0.0/16", "fd00::/64")
	f.Add("fd00:71::/48", "fe80::/64,fd00:71:1::/64", "::ffff:10.0.0.0/104")
	f.Add("10.244.0.0/24", "0.0.0.0/0", "169.254.169.254/32")
	f.Add("10.71.0.0/16", "10.71.3.0/24", "10.73.0.1/16")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		facts := nodeFacts()
		for i, s := range []string{a, b, c} {
			g := FabricGateway{Name: fmt.Sprintf("g%d", i), Address: netip.MustParseAddr("10.244.0.10"), Local: true}
			for _, f := range strings.Split(s, ",") {
				if p, err := netip.ParsePrefix(f); err == nil {
					g.Ranges = append(g.Ranges, p)
				}
			}
			facts.Gateways = append(facts.Gateways, g)
		}
		p, err := PlanFabric(facts)
		if err != nil {
			t.Fatalf("PlanFabric failed on gateway facts: %v", err)
		}
		var routed []netip.Prefix
		for _, r := range p.Routes.Routes {
			if r.Table != TablePodSources {
				continue
			}
			if r.Dst != r.Dst.Masked() || r.Dst.Overlaps(facts.PodCIDRs[0]) || rangepolicy.CheckRoutable(r.Dst) != nil {
				t.Fatalf("routes %s", r.Dst)
			}
			routed = append(routed, r.Dst)
		}
		if i, j, ok := cidr.FirstOverlap(routed); ok {
			t.Fatalf("routes overlapping ranges %s and %s", routed[i], routed[j])
		}
	})
}

// TestPlanFabricNodeSources checks the way of a node's own traffic: every
// node sends it straight to the gateway pod, as it sends its pods' (the
// gateway translates it), and the gateway's node routes the answers for
// another node's address back through the overlay, untracked, as it
// routes those for another node's pods.
func TestPlanFabricNodeSources(t *testing.T) {
	gwNode, other := netip.MustParseAddr("172.18.0.5"), netip.MustParseAddr("172.18.0.2")
	peer := netip.MustParsePrefix("10.71.0.0/16")
	gwPod := netip.MustParseAddr("10.244.3.9")
	facts := func(node netip.Addr) FabricFacts {
		f := nodeFacts()
		f.Node = node
		f.Gateways = []FabricGateway{{Name: "b", Address: gwPod, Node: gwNode, Local: node == gwNode, Ranges: []netip.Prefix{peer}}}
		f.Nodes = []FabricNode{
			{Address: other, PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/24")}},
			{Address: gwNode, PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.3.0/24")}},
		}
		return f
	}
	hasRoute := func(p FabricPlan, table int, dst netip.Prefix, via netip.Addr) bool {
		return slices.ContainsFunc(p.Routes.Routes, func(r plan.Route) bool {
			return r.Table == table && r.Dst == dst && r.Via == via && r.Encap == via && r.Link == OverlayLink
		})
	}

	onOther, err := PlanFabric(facts(other))
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []int{TablePodSources, TableHostSources} {
		if !hasRoute(onOther, table, peer, gwPod) {
			t.Errorf("node without the gateway: no route for %s via the gateway pod %s in table %d:\n%s", peer, gwPod, table, onOther.Routes)
		}
	}

	onGateway, err := PlanFabric(facts(gwNode))
	if err != nil {
		t.Fatal(err)
	}
	if !hasRoute(onGateway, TableOtherNodes, netip.PrefixFrom(other, 32), other) {
		t.Errorf("gateway's node: no route back to node %s through the overlay in table %d:\n%s", other, TableOtherNodes, onGateway.Routes)
	}
	i := slices.IndexFunc(onGateway.NAT.Sets, func(s plan.Set) bool { return s.Name == setOtherNodes })
	if i < 0 || !slices.Equal(onGateway.NAT.Sets[i].Prefixes, []netip.Prefix{netip.PrefixFrom(other, 32)}) {
		t.Errorf("gateway's node: set %s is not just %s:\n%s", setOtherNodes, other, onGateway.NAT)
	}
	notrack := slices.ContainsFunc(onGateway.NAT.Chains[0].Rules, func(r plan.Rule) bool {
		return r.IIF == OverlayLink && r.DstIn == setOtherNodes && r.Notrack
	})
	if !notrack {
		t.Errorf("gateway's node: answers to other nodes are tracked:\n%s", onGateway.NAT)
	}
}
