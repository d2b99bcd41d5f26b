package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/peerlink/peerlink/lab/figures"
)

const (
	// meshConnectGoal is the ceiling, per peering, of the time from the
	// first `network connect` of a full mesh to every peering Connected:
	// the connects run one after another, each about 3 to 4 s.
	meshConnectGoal = 5.0
	// meshCallGoal is the ceiling, per direction of a pair, of the time
	// from every cluster's ServiceExport to every cluster answered by
	// every other's Service by name: the exports are made at once and
	// the calls one after another.
	meshCallGoal = 1.0
)

// meshTable measures a full mesh of real clusters of the lab, brought up
// for the purpose and removed afterwards: how long the peerings take to
// connect and the exported Services to answer by name in every direction,
// and what each peering costs in resident memory on each side.
func meshTable(ctx context.Context) (*table, error) {
	t := &table{title: "Full mesh: five real clusters of the lab, every pair peered with `peerlink network connect`"}
	var m figures.Mesh
	if ran, err := labBench(ctx, t, &m, "--mesh"); !ran || err != nil {
		return t, err
	}
	directions := m.Clusters * (m.Clusters - 1)
	t.rows = append(t.rows,
		row{name: fmt.Sprintf("first connect -> all %d peerings of %d clusters Connected", m.Peerings, m.Clusters),
			measured: m.ConnectedSeconds, goal: meshConnectGoal * float64(m.Peerings), unit: "s", dir: atMost},
		row{name: fmt.Sprintf("every cluster's export -> answered by name in all %d directions", directions),
			measured: m.ServicesSeconds - m.ConnectedSeconds, goal: meshCallGoal * float64(directions), unit: "s", dir: atMost},
	)
	mib := func(v float64) string { return fmt.Sprintf("%.0f", v/(1<<20)) }
	millicores := func(v float64) string { return fmt.Sprintf("%.1f", v*1000) }
	t.notes = append(t.notes,
		fmt.Sprintf("goals: %.0f s per peering (the connects run one after another), %.0f s per direction (the calls too)", meshConnectGoal, meshCallGoal),
		fmt.Sprintf("cost of a peering: one gateway pod on each side, %s MiB resident each (%d gateways: smallest, median, largest),",
			spread(m.GatewayMemory, mib), len(m.GatewayMemory)),
		fmt.Sprintf("  idle (no traffic but the tunnels' own, 30 s): %s millicores each", spread(m.GatewayIdleCPU, millicores)),
		fmt.Sprintf("controller of each cluster, serving %d peers: %s MiB resident, %s millicores idle", m.Clusters-1,
			spread(m.ControllerMemory, mib), spread(m.ControllerIdleCPU, millicores)),
		"the fabric's cost of a peering on each node is the peering table's, the controller's memory per peer the control plane table's",
	)
	return t, nil
}

// spread says the smallest, the median and the largest of vs, each as
// format writes it.
func spread(vs []float64, format func(float64) string) string {
	if len(vs) == 0 {
		return "none measured:"
	}
	return fmt.Sprintf("%s / %s / %s", format(slices.Min(vs)), format(medianOf(vs)), format(slices.Max(vs)))
}
