package gateway

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
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

// TestMovedHint checks that a client's Connection, while the server does
// not answer, names the endpoint its tunnel sends to and how to find the
// server's endpoint now, and that a server's, or a connected client's,
// says nothing of it.
func TestMovedHint(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ep := netip.MustParseAddrPort("172.30.12.2:31820")
	readyMessage := func(s connectionStatus) string {
		for _, c := range s.object(1, t0)["conditions"].([]any) {
			if c := c.(map[string]any); c["type"] == netv1beta1.ConditionReady {
				return c["message"].(string)
			}
		}
		t.Fatal("no Ready condition")
		return ""
	}
	for _, tc := range []struct {
		name   string
		status connectionStatus
		hint   bool
	}{
		{"client, pings unanswered", connectionStatus{value: health.Error, dialed: ep}, true},
		{"client, never answered", connectionStatus{value: health.Connecting, dialed: ep}, true},
		{"client, connected", connectionStatus{value: health.Connected, dialed: ep}, false},
		{"server, pings unanswered", connectionStatus{value: health.Error}, false},
	} {
		msg := readyMessage(tc.status)
		hinted := strings.Contains(msg, "sends to the server at "+ep.String()) && strings.Contains(msg, "peerlink info peer")
		if hinted != tc.hint {
			t.Errorf("%s: Ready says %q; want the endpoint and how to follow it: %v", tc.name, msg, tc.hint)
		}
	}
}
