package fabric

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/dataplane/resync"
)

// TestRecordSync: a successful sync sets what its plan programmed and the
// time; a waiting or failed one is counted by its result and leaves the
// last success's figures as they were.
func TestRecordSync(t *testing.T) {
	var p dataplane.FabricPlan
	p.Routes.Routes = make([]plan.Route, 3)
	p.Routes.Rules = make([]plan.PolicyRule, 2)
	p.Skipped = []dataplane.SkippedGateway{{Name: "bad", Reason: "an IPv6 range"}}
	at := time.Unix(1_800_000_000, 0)
	before := map[string]float64{}
	for _, r := range []string{"ok", "waiting", "error"} {
		before[r] = testutil.ToFloat64(syncs.WithLabelValues(r))
	}

	recordSync(p, 3, nil, at)
	recordSync(dataplane.FabricPlan{}, 0, resync.Waiting{Reason: "no cluster info"}, at.Add(time.Minute))
	recordSync(dataplane.FabricPlan{}, 0, errors.New("netlink: no such device"), at.Add(2*time.Minute))

	for kind, want := range map[string]float64{"routes": 3, "rules": 2, "gateways": 2, "skipped_gateways": 1} {
		if got := testutil.ToFloat64(programmed.WithLabelValues(kind)); got != want {
			t.Errorf("programmed %s = %v, want %v", kind, got, want)
		}
	}
	if got := testutil.ToFloat64(lastSync); got != float64(at.Unix()) {
		t.Errorf("last sync %v, want %v: only a sync that succeeded sets it", got, at.Unix())
	}
	for _, r := range []string{"ok", "waiting", "error"} {
		if got := testutil.ToFloat64(syncs.WithLabelValues(r)) - before[r]; got != 1 {
			t.Errorf("syncs %s counted %v times, want once", r, got)
		}
	}
}
