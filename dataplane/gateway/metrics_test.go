package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/peerlink/peerlink/dataplane/health"
)

// TestConnectionStateMetric: the state gauge is absent before the first
// health report, then 1 for the reported state and 0 for the others.
func TestConnectionStateMetric(t *testing.T) {
	m := newMetrics(time.Now)
	if n, err := testutil.GatherAndCount(registryOf(t, m), "peerlink_gateway_connection_state"); err != nil || n != 0 {
		t.Fatalf("before any report: %d series (%v), want none", n, err)
	}
	for _, s := range []health.State{health.Connecting, health.Connected, health.Error} {
		m.observeState(s)
		want := `
# HELP peerlink_gateway_connection_state The tunnel's health, as the Connection's status.value says it: 1 for the state in the label (Connecting, Connected, Error), 0 for the others; absent before the first health report.
# TYPE peerlink_gateway_connection_state gauge
`
		for _, other := range []health.State{health.Connected, health.Connecting, health.Error} {
			v := "0"
			if other == s {
				v = "1"
			}
			want += `peerlink_gateway_connection_state{state="` + string(other) + `"} ` + v + "\n"
		}
		if err := testutil.GatherAndCompare(registryOf(t, m), strings.NewReader(want), "peerlink_gateway_connection_state"); err != nil {
			t.Errorf("after %s: %v", s, err)
		}
	}
}

// registryOf is a registry of m alone.
func registryOf(t *testing.T, m *metrics) *prometheus.Registry {
	t.Helper()
	r := prometheus.NewPedanticRegistry()
	if err := r.Register(m); err != nil {
		t.Fatal(err)
	}
	return r
}
