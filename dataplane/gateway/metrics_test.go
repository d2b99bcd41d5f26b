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

// TestIgnoredPacketsMetric: the health prober's ignored packets are
// counted by reason, every reason present from the start.
func TestIgnoredPacketsMetric(t *testing.T) {
	m := newMetrics(time.Now)
	m.observeIgnored(map[string]uint64{"malformed": 3, "sender": 1})
	want := `
# HELP peerlink_gateway_health_ignored_packets_total Packets the health prober ignored, by reason: sender (not from the peer's tunnel address and port), malformed (not a packet of the protocol, or an announcement outside its bounds), stale (an answer to no question waiting for one), leaving (a ping after this side said goodbye).
# TYPE peerlink_gateway_health_ignored_packets_total counter
peerlink_gateway_health_ignored_packets_total{reason="leaving"} 0
peerlink_gateway_health_ignored_packets_total{reason="malformed"} 3
peerlink_gateway_health_ignored_packets_total{reason="sender"} 1
peerlink_gateway_health_ignored_packets_total{reason="stale"} 0
`
	if err := testutil.GatherAndCompare(registryOf(t, m), strings.NewReader(want), "peerlink_gateway_health_ignored_packets_total"); err != nil {
		t.Error(err)
	}
}
