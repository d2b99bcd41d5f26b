package gateway

import (
	"net/netip"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/peerlink/peerlink/api/gatewayrole"
	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/dataplane/health"
	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/dataplane/resync"
)

// notified reports whether t was notified, and takes the notice.
func notified(t resync.Trigger) bool {
	select {
	case <-t:
		return true
	default:
		return false
	}
}

// TestProberReports feeds a client's and a server's prober reports: a late
// one asks a client for a handshake and nothing else, a new path MTU asks
// for a plan once, unanswered pings make a client force a handshake and,
// every second miss, try the server's next address; the Connection's
// writer gets the latest report only; the keys the peer accepts reach the
// rotation.
func TestProberReports(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	newTestProber := func(role gatewayrole.Role) (*prober, *rotation, resync.Trigger) {
		m := newMetrics(time.Now)
		replan := resync.NewTrigger()
		r := newRotation(Options{}, m, func() time.Time { return now }, logr.Discard())
		return newProber(Options{Role: role, PingInterval: time.Second, MaxMisses: 5}, replan, r, m, func() time.Time { return now }, logr.Discard()), r, replan
	}
	p, r, replan := newTestProber(gatewayrole.Client)
	key := newKey(t).PublicKey()
	p.onReport(health.Report{Late: true, PeerLeft: true, Accepted: []plan.Key{key}})
	if !notified(p.rehandshake) || notified(replan) || len(p.reports) != 0 || !p.peerLeft.Load() {
		t.Error("a late report: want a handshake asked for, the peer marked gone, no plan and no report for the Connection")
	}
	if !r.own.accepts(key) {
		t.Error("the key the peer accepts did not reach the rotation")
	}

	p.onReport(health.Report{State: health.Connected, PathMTU: 1300, MTU: 1340})
	if !notified(replan) || notified(p.rehandshake) {
		t.Error("a new path MTU: want a plan asked for, and no handshake")
	}
	p.onReport(health.Report{State: health.Connected, PathMTU: 1300, MTU: 1340})
	if notified(replan) {
		t.Error("the same path MTU again asked for a plan")
	}
	if p.pathMTU.Load() != 1300 || p.metrics.measuredPathMTU != 1300 {
		t.Errorf("path MTU %d, metric %d; want 1300", p.pathMTU.Load(), p.metrics.measuredPathMTU)
	}

	p.onReport(health.Report{State: health.Connecting, Misses: 1})
	if !notified(p.rehandshake) || notified(replan) || p.endpointTurn.Load() != 0 {
		t.Error("one miss: want a handshake asked for, and the same address")
	}
	last := health.Report{State: health.Connecting, Misses: endpointMisses}
	p.onReport(last)
	if !notified(p.rehandshake) || !notified(replan) || p.endpointTurn.Load() != 1 {
		t.Errorf("%d misses: want a handshake and a plan asked for, and the next address (turn %d)", endpointMisses, p.endpointTurn.Load())
	}
	if got := <-p.reports; got.Misses != last.Misses || len(p.reports) != 0 {
		t.Errorf("the Connection's writer got %+v, want the latest report alone", got)
	}

	s, _, replan := newTestProber(gatewayrole.Server)
	s.onReport(health.Report{Late: true})
	s.onReport(health.Report{State: health.Connecting, Misses: endpointMisses})
	if notified(s.rehandshake) || notified(replan) || s.endpointTurn.Load() != 0 {
		t.Error("a server asked for a handshake or moved on to another address")
	}

	if got := s.announcedView(); got != nil {
		t.Errorf("view before a plan = %v", got)
	}
	remote := []dataplane.RangeMapping{{Real: netip.MustParsePrefix("10.244.0.0/16"), Remapped: netip.MustParsePrefix("10.71.0.0/16")}}
	s.applied(1340, remote)
	if got := s.announcedView(); len(got) != 1 || got[0].Range != remote[0].Real || got[0].SeenAs != remote[0].Remapped || s.tunnelMTU.Load() != 1340 {
		t.Errorf("view %v, MTU %d after a plan; want %v and 1340", got, s.tunnelMTU.Load(), remote)
	}
}
