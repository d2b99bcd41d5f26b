package fabric

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/dataplane/resync"
)

// The fabric agent's metrics, served with controller-runtime's on the
// agent's metrics address (--metrics-bind-address): what the last sync
// programmed into the node and how syncs went.
var (
	syncs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "peerlink_fabric_syncs_total",
		Help: "Syncs of the node's overlay link, routes, rules and NAT table, by result: ok, waiting (a fact not published yet), error.",
	}, []string{"result"})
	lastSync = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "peerlink_fabric_last_sync_timestamp_seconds",
		Help: "When the last sync that succeeded ended, in seconds since the epoch; absent before the first.",
	})
	programmed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "peerlink_fabric_programmed",
		Help: "What the last successful sync programmed into the node, by kind: routes, rules, gateways (the active gateway pods routed to, one per peer), " +
			"skipped_gateways (left out for their facts: their peers get no routes on this node).",
	}, []string{"kind"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(syncs, lastSync, programmed)
}

// recordSync counts a sync by its result and, when it succeeded, records
// what its plan programmed for the gateways of its facts.
func recordSync(p dataplane.FabricPlan, gateways int, err error, now time.Time) {
	switch {
	case err == nil:
		syncs.WithLabelValues("ok").Inc()
	case resync.IsWaiting(err):
		syncs.WithLabelValues("waiting").Inc()
		return
	default:
		syncs.WithLabelValues("error").Inc()
		return
	}
	lastSync.Set(float64(now.UnixNano()) / 1e9)
	programmed.WithLabelValues("routes").Set(float64(len(p.Routes.Routes)))
	programmed.WithLabelValues("rules").Set(float64(len(p.Routes.Rules)))
	programmed.WithLabelValues("gateways").Set(float64(gateways - len(p.Skipped)))
	programmed.WithLabelValues("skipped_gateways").Set(float64(len(p.Skipped)))
}
