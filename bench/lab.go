package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"

	"github.com/peerlink/peerlink/lab/figures"
)

const (
	// connectGoal is the ceiling of the time from the last manifest
	// applied to Connected on both sides.
	connectGoal = 3.0
	// recoveryGoal is the ceiling of the time without traffic after a
	// gateway pod is deleted.
	recoveryGoal = 5.0
	// failoverGoal is the ceiling of the time without traffic after the
	// active pod of a gateway of two replicas is deleted.
	failoverGoal = 0.5
	// exportGoal is the ceiling of the median time from a ServiceExport
	// to an answer by its clusterset name in the peer; importGoal that of
	// importing the large export set.
	exportGoal = 1.0
	importGoal = 30.0
	// directFactor bounds the time to every endpoint of the large set
	// imported ready, as a multiple of the time the importing API server
	// takes to accept the same objects written directly.
	directFactor = 1.2
	// endpointChangeGoal is the ceiling of the median time an endpoint
	// change takes to reach the peer with the large set in place.
	endpointChangeGoal = 1.0
)

// labTable measures the whole system on two real clusters of the lab,
// brought up for the purpose and removed afterwards: connect time, recovery
// from the loss of a gateway pod, and pod-to-pod throughput and
// request/response rate through the peering beside the same pods over the
// bare node network (a NodePort). The lab needs root.
func labTable(ctx context.Context) (*table, error) {
	t := &table{title: "Whole system: two real clusters of the lab, peered with `peerlink network connect`"}
	var f figures.Figures
	if ran, err := labBench(ctx, t, &f); !ran || err != nil {
		return t, err
	}
	t.rows = append(t.rows, row{name: "last manifest applied -> Connected (both sides)", measured: f.ConnectSeconds, goal: connectGoal, unit: "s", dir: atMost})
	for _, id := range slices.Sorted(maps.Keys(f.RecoverySeconds)) {
		t.rows = append(t.rows, row{name: "gateway pod of " + id + " deleted -> traffic back", measured: f.RecoverySeconds[id], goal: recoveryGoal, unit: "s", dir: atMost})
		if s, ok := f.FailoverSeconds[id]; ok {
			t.rows = append(t.rows, row{name: "  2 replicas: active pod of " + id + " deleted -> traffic back", measured: s, goal: failoverGoal, unit: "s", dir: atMost})
		}
	}
	t.rows = append(t.rows,
		row{name: "pod->pod TCP throughput across clusters (ceiling: same pods over the node network)", measured: f.Tunnel.BitsPerSecond / 1e6, goal: f.Bare.BitsPerSecond / 1e6, unit: "Mbit/s", dir: atMost},
		row{name: "pod->pod request/response across clusters (ceiling: same pods over the node network)", measured: f.Tunnel.ExchangesPerSecond, goal: f.Bare.ExchangesPerSecond, unit: "/s", dir: atMost},
	)
	sv := f.Services
	endpoints := sv.Services * sv.Endpoints
	t.rows = append(t.rows,
		row{name: "ServiceExport created -> answer by clusterset name in the peer (median of 5)", measured: sv.MedianExportToAnswer, goal: exportGoal, unit: "s", dir: atMost},
		row{name: fmt.Sprintf("%d exported Services of %d endpoints -> all imported", sv.Services, sv.Endpoints), measured: sv.ImportSeconds, goal: importGoal, unit: "s", dir: atMost},
		row{name: fmt.Sprintf("  -> all %d endpoints ready (ceiling: %.2f x the same objects written directly, %.1f s)", endpoints, directFactor, sv.DirectSeconds),
			measured: sv.ReadySeconds, goal: directFactor * sv.DirectSeconds, unit: "s", dir: atMost},
		row{name: fmt.Sprintf("  one endpoint's readiness changed -> the peer's EndpointSlice, at %d endpoints (median of 5)", endpoints),
			measured: sv.EndpointChangeSeconds, goal: endpointChangeGoal, unit: "s", dir: atMost},
	)
	t.notes = append(t.notes, fmt.Sprintf("the importing gateway received %.1f MiB through the tunnel while the %d services were imported (%.0f bytes per endpoint)",
		sv.TunnelBytes/(1<<20), sv.Services, sv.TunnelBytes/float64(max(endpoints, 1))))
	for _, k := range slices.Sorted(maps.Keys(sv.Restarts)) {
		t.notes = append(t.notes, fmt.Sprintf("restarted during the services part, %s: %s", k, sv.Restarts[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(sv.ReconcileSeconds)) {
		t.notes = append(t.notes, fmt.Sprintf("a reconcile of the services controller of %s during the endpoint changes: %.0f ms on average", k, 1000*sv.ReconcileSeconds[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(sv.Memory)) {
		t.notes = append(t.notes, fmt.Sprintf("peak resident memory while the %d services were imported, %s: %.0f MiB", sv.Services, k, sv.Memory[k]/(1<<20)))
	}
	t.notes = append(t.notes, fmt.Sprintf("written directly: the same %d Services and EndpointSlices created in the importing cluster by one client, %d at once, as the controller writes;",
		sv.Services, sv.DirectWorkers),
		fmt.Sprintf("  with the ServiceImport of each and its status too (the four writes of an import): %.1f s, so all ready took %.2f times that",
			sv.DirectImportsSeconds, sv.ReadySeconds/max(sv.DirectImportsSeconds, 1e-9)))
	t.notes = append(t.notes,
		"traffic back: longest time without an answer to an HTTP request sent every 100 ms, over the 20 s after the deletion;",
		"  with 2 replicas the same peering has a standby gateway pod on each side, which takes over",
		"throughput: one TCP stream for 5 s; request/response: 64-byte exchanges on one TCP connection for 5 s;",
		"  the node network path is the same pods through a NodePort of the other cluster (no tunnel)")
	return t, nil
}

// labBench runs `go run ./lab bench --json` with args, as root, and
// decodes what it prints into figures. Without root it notes in t that
// the table is skipped, and reports that it did not run.
func labBench(ctx context.Context, t *table, figures any, args ...string) (bool, error) {
	if os.Geteuid() != 0 {
		t.notes = append(t.notes, "skipped: the lab needs root")
		return false, nil
	}
	gobin := os.Getenv("GO")
	if gobin == "" {
		gobin = "go"
	}
	cmd := exec.CommandContext(ctx, gobin, append([]string{"run", "./lab", "bench", "--json"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return false, fmt.Errorf("%s: go run ./lab bench %v: %w", t.title, args, err)
	}
	if err := json.Unmarshal(out, figures); err != nil {
		return false, fmt.Errorf("%s: figures %q: %w", t.title, out, err)
	}
	return true, nil
}
