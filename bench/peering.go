package main

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/dataplane/plan"
)

// peeringCounts are the numbers of peers the fabric's plan is made for:
// the cost of a peering is the growth from one to the next, divided by the
// peers added.
var peeringCounts = []int{10, 100, 1000}

// fabricNodes is the size of the cluster whose node the plan is for; the
// gateways run on the other nodes, as they do on every node but theirs.
const fabricNodes = 3

// fabricCost is what a node's fabric plan holds.
type fabricCost struct {
	routes, rules, neighbors, elements int
}

// peeringTable measures what one idle peering costs every node's fabric:
// the routes, policy rules, overlay neighbors and nftables set and map
// elements the plan gains per peering, from 10 to 100 peers and from 100
// to 1,000. Flat is the goal: the thousandth peering costs what the tenth
// did.
func peeringTable(_ context.Context) (*table, error) {
	costs := make([]fabricCost, len(peeringCounts))
	for i, n := range peeringCounts {
		c, err := planFabricFor(n)
		if err != nil {
			return nil, err
		}
		costs[i] = c
	}
	per := func(i int, of func(fabricCost) int) float64 {
		return float64(of(costs[i])-of(costs[i-1])) / float64(peeringCounts[i]-peeringCounts[i-1])
	}
	t := &table{title: fmt.Sprintf("Cost of one idle peering on each node's fabric (plan of a node of %d, the gateways on the others)", fabricNodes)}
	for _, k := range []struct {
		what string
		of   func(fabricCost) int
	}{
		{"routes", func(c fabricCost) int { return c.routes }},
		{"policy rules", func(c fabricCost) int { return c.rules }},
		{"overlay neighbors", func(c fabricCost) int { return c.neighbors }},
		{"nftables set and map elements", func(c fabricCost) int { return c.elements }},
	} {
		early, late := per(1, k.of), per(2, k.of)
		if early == 0 && late == 0 {
			t.notes = append(t.notes, "a peering adds no "+k.what)
			continue
		}
		t.rows = append(t.rows, row{
			name:     fmt.Sprintf("%s per peering, 100th to 1,000th (goal: as 10th to 100th)", k.what),
			measured: late, goal: early, dir: atMost,
		})
	}
	for i, n := range peeringCounts {
		c := costs[i]
		t.notes = append(t.notes, fmt.Sprintf("%s peers: %d routes, %d rules, %d neighbors, %d set and map elements",
			number(float64(n)), c.routes, c.rules, c.neighbors, c.elements))
	}
	t.notes = append(t.notes,
		"every nftables lookup goes through a set or an interval map, so the rules on the packet path stay as many whatever the peers (the dataplane table measures the throughput)",
		"each peering runs its own gateway pod(s), whose plan holds that peering alone: their cost per peering is one pod's (the mesh table measures its resident memory and idle CPU; the control plane table the controller's memory per peer)")
	return t, nil
}

// planFabricFor plans the fabric of one node for n peers, each with a pod
// and an external range and an active gateway pod of its own on another
// node.
func planFabricFor(n int) (fabricCost, error) {
	p, err := fabricPlanFor(n)
	if err != nil {
		return fabricCost{}, err
	}
	c := fabricCost{routes: len(p.Routes.Routes), rules: len(p.Routes.Rules), neighbors: len(p.Routes.Neighbors)}
	for _, s := range p.NAT.Sets {
		c.elements += len(s.Prefixes)
	}
	for _, m := range p.NAT.Maps {
		c.elements += len(m.Elements)
	}
	return c, nil
}

// fabricPlanFor plans the fabric of the first node of a cluster of
// fabricNodes whose other nodes run the gateways of n peers.
func fabricPlanFor(n int) (dataplane.FabricPlan, error) {
	node := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{172, 18, 0, byte(1 + i)}) }
	facts := dataplane.FabricFacts{
		Node: node(0), OverlayKind: plan.VXLAN, OverlayMTU: 1450,
		PodCIDRs:      []netip.Prefix{netip.MustParsePrefix("10.240.0.0/12")},
		UnknownSource: netip.MustParseAddr("10.70.0.1"),
	}
	for i := range fabricNodes {
		facts.Nodes = append(facts.Nodes, dataplane.FabricNode{Address: node(i),
			PodCIDRs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(240 + i), 0, 0}), 16)}})
	}
	for i := range n {
		gwNode := 1 + i%(fabricNodes-1)
		facts.Gateways = append(facts.Gateways, dataplane.FabricGateway{
			Name:    "peer-" + strconv.Itoa(i),
			Address: netip.AddrFrom4([4]byte{10, byte(240 + gwNode), byte(i / 250), byte(2 + i%250)}),
			Node:    node(gwNode),
			Ranges: []netip.Prefix{
				netip.PrefixFrom(netip.AddrFrom4([4]byte{172, byte(16 + i/256), byte(i % 256), 0}), 24),
				netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(128 + i/256), byte(i % 256), 0}), 24),
			},
		})
	}
	p, err := dataplane.PlanFabric(facts)
	if err != nil {
		return p, err
	}
	if len(p.Skipped) > 0 {
		return p, fmt.Errorf("fabric plan for %d peers left %s out: %s", n, p.Skipped[0].Name, p.Skipped[0].Reason)
	}
	return p, nil
}
