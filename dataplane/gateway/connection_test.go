package gateway

import (
	"testing"
	"time"

	"github.com/peerlink/peerlink/dataplane/health"
)

// TestConnectionStatusAfter checks which health reports call for a write
// of the Connection's status, and the transitions they move: a new value
// at once with its transition, a new latency alone only latencyPeriod
// after the last one written, a path MTU's transition only when the path
// goes below the configured MTU or back.
func TestConnectionStatusAfter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, changed := connectionStatus{}.after(health.Report{State: health.Connected, RTT: time.Millisecond, PathMTU: 1340, MTU: 1340}, t0)
	if !changed || s.value != health.Connected || !s.transition.Equal(t0) || s.latency != "1ms" || !s.pathTransition.Equal(t0) {
		t.Fatalf("first report: %+v, %v", s, changed)
	}
	t1 := t0.Add(time.Second)
	if _, changed := s.after(health.Report{State: health.Connected, RTT: 2 * time.Millisecond, PathMTU: 1340, MTU: 1340}, t1); changed {
		t.Error("a new latency alone, a second after the last one written, calls for a write")
	}
	t2 := t0.Add(latencyPeriod)
	next, changed := s.after(health.Report{State: health.Connected, RTT: 2 * time.Millisecond, PathMTU: 1340, MTU: 1340}, t2)
	if !changed || next.latency != "2ms" || !next.transition.Equal(t0) {
		t.Errorf("a new latency after latencyPeriod: %+v, %v; want it written, the value's transition kept", next, changed)
	}
	next, changed = s.after(health.Report{State: health.Connected, RTT: time.Millisecond, PathMTU: 1300, MTU: 1340}, t1)
	if !changed || next.pathMTU != 1300 || !next.pathTransition.Equal(t1) {
		t.Errorf("a path below the MTU: %+v, %v; want path MTU 1300 since t1", next, changed)
	}
	next, changed = next.after(health.Report{State: health.Connected, RTT: time.Millisecond, PathMTU: 1280, MTU: 1340}, t2)
	if !changed || next.pathMTU != 1280 || !next.pathTransition.Equal(t1) {
		t.Errorf("a narrower path still below the MTU: %+v, %v; want path MTU 1280, transition kept", next, changed)
	}
	next, changed = next.after(health.Report{State: health.Error, Misses: 5}, t2)
	if !changed || next.value != health.Error || !next.transition.Equal(t2) || next.pathMTU != 1280 || next.latency != "" {
		t.Errorf("an Error without a measurement: %+v, %v; want Error since t2, the path MTU kept", next, changed)
	}
}
