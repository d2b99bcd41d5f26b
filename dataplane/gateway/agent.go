package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/dataplane/health"
	"github.com/peerlink/peerlink/dataplane/resync"
)

// Agent runs one gateway. It is a controller-runtime Runnable: Start runs
// it until its context ends, then removes what it created.
//
// It is the supervisor of the gateway's parts, each touched by the
// goroutine of Start unless its doc says otherwise: the facts it plans
// from (factReader), the pod's network namespace (podNetwork), the Lease
// election (leadership, activeMarker), the key rotation (rotation), the
// health prober (prober), the Connection (connectionWriter) and the
// service exchange (services).
type Agent struct {
	opts      Options
	client    client.Client
	informers cache.Informers
	log       logr.Logger
	now       func() time.Time
	metrics   *metrics
	outcome   *resync.Outcome
	// trigger asks the main loop to sync.
	trigger resync.Trigger

	gateway  *gatewayObject
	facts    *factReader
	lead     *leadership
	marker   *activeMarker
	rotation *rotation
	prober   *prober
	conn     *connectionWriter
	// net is opened by Start.
	net *podNetwork
}

// New returns an agent that reads the API through c and is notified of
// changes by informers (both from a manager whose cache is limited to the
// gateway's namespace). With an election it is one of several replicas and
// stands by until it holds the Lease; without, it is active at once.
func New(opts Options, c client.Client, informers cache.Informers, election *Election, log logr.Logger) (*Agent, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if election != nil && (election.Lock == nil || election.Pods == nil || election.PodName == "") {
		return nil, errors.New("gateway election: the Lease lock, a pod client and the pod's name (POD_NAME) are all required")
	}
	a := &Agent{opts: opts, client: c, informers: informers, log: log, now: time.Now, metrics: newMetrics(time.Now),
		outcome: resync.NewOutcome(log, "not configuring the tunnel yet", "sync the gateway; retrying"), trigger: resync.NewTrigger()}
	a.gateway = &gatewayObject{opts: opts, client: c, uid: opts.GatewayUID}
	a.facts = &factReader{opts: opts, client: c, informers: informers, log: log, gateway: a.gateway}
	a.lead = newLeadership(election, opts, informers, log)
	if election != nil {
		a.marker = &activeMarker{opts: opts, election: election, log: log}
	}
	a.rotation = newRotation(opts, a.metrics, a.now, log)
	a.prober = newProber(opts, a.trigger, a.rotation, a.metrics, a.now, log)
	a.conn = &connectionWriter{c: c, name: netv1beta1.GatewayObjectPrefix + opts.Name, ns: opts.Namespace,
		clusterID: opts.RemoteClusterID, role: opts.Role, gatewayRef: a.gateway.ref, now: a.now}
	if opts.Role == gatewayrole.Server {
		a.prober.endpoint = a.gateway.publishedEndpoint
	} else {
		a.facts.follower = &endpointFollower{localRanges: opts.LocalRanges, conn: a.conn, log: log}
		a.prober.follow = a.facts.follower.announced
	}
	return a, nil
}

// Collector exports the agent's metrics.
func (a *Agent) Collector() prometheus.Collector { return a.metrics }

// Ready is the readiness check: the plan is applied and the last sync
// succeeded. It does not wait for the peer to answer: the server's Service
// only sends it traffic once it is ready.
func (a *Agent) Ready(r *http.Request) error { return a.outcome.Ready(r) }

// Start runs the agent until ctx ends: it syncs on every change, and runs
// the parts' events. The first configured tunnel of the active replica
// starts the measurement (the prober, the Connection's status, the service
// exchange); it lives as long as the agent, and stops before the cleanup.
func (a *Agent) Start(ctx context.Context) error {
	var err error
	if a.net, err = openPodNetwork(a.opts, a.conn, a.metrics, a.log); err != nil {
		return err
	}
	defer a.net.kernel.Close()
	if err := a.setUp(ctx); err != nil {
		return err
	}
	defer a.lead.stop()
	m := newMeasurement()
	defer m.cancel()
	resync.Tick(ctx, a.trigger, a.opts.ResyncInterval)
	rotationTick := time.NewTicker(rotationPoll)
	defer rotationTick.Stop()
	for {
		select {
		case <-ctx.Done():
			// The Lease is released at once, so that a standby takes
			// over while this replica says goodbye; the prober says it
			// through the tunnel before it goes, and the Connection writer
			// stops, before the cleanup.
			a.lead.stop()
			m.stop()
			a.net.cleanup()
			return nil
		case <-a.trigger:
		case <-a.prober.rehandshake:
			a.prober.forceHandshake(a.net.tunnel.Device(), a.net.applied)
			continue
		case <-rotationTick.C:
			a.rotate(ctx, m.running)
			continue
		case <-a.lead.elected:
			if a.lead.takeOver() {
				a.net.restoreEndpoint(ctx)
			}
		case <-a.lead.deposed:
			if err := a.lead.restart(); err != nil {
				return err
			}
			continue
		case <-a.lead.released:
			if err := a.lead.onReleased(); err != nil {
				return err
			}
			continue
		case <-a.lead.superseded:
			if !a.lead.lost(ctx) {
				continue
			}
			// The pod starts again as a standby.
			m.stop()
			a.net.cleanup()
			return fmt.Errorf("lost the Lease of gateway %s/%s: stopped, to start again as a standby", a.opts.Namespace, a.opts.Name)
		}
		a.resync(ctx, m)
	}
}

// setUp watches what the plan reads, restores what the last run recorded
// on the Connection (a server's client endpoint, the public key the tunnel
// ran on) and starts the election.
func (a *Agent) setUp(ctx context.Context) error {
	if a.marker != nil {
		a.marker.address = a.net.overlay.Address
	}
	if err := a.facts.watch(ctx, a.trigger); err != nil {
		return err
	}
	a.net.restoreEndpoint(ctx)
	if a.facts.follower != nil {
		a.facts.follower.restore(ctx)
	}
	a.rotation.restore(ctx, a.conn)
	return a.lead.start(ctx)
}

// resync syncs, marking the pod of a newly active replica meanwhile, and
// starts the measurement on the first configured tunnel of the active
// replica.
func (a *Agent) resync(ctx context.Context, m *measurement) {
	var synced bool
	a.marker.markWhile(ctx, a.lead.active.Load(), func() { synced = a.sync(ctx) })
	if m.running {
		a.rotation.reportKey(ctx, a.conn, a.net.applied)
	}
	if !synced || !a.lead.active.Load() || m.running {
		return
	}
	if err := a.conn.ensure(ctx); err != nil {
		a.log.Error(err, "create the Connection; retrying")
		return
	}
	if err := a.conn.report(ctx, health.Report{State: health.Connecting}); err != nil {
		a.log.Error(err, "write the Connection's status")
	}
	a.rotation.reportKey(ctx, a.conn, a.net.applied)
	if err := a.prober.start(m.ctx, m.run); err != nil {
		a.log.Error(err, "start the health prober; retrying")
		return
	}
	deps := serviceDeps{opts: a.opts, client: a.client, log: a.log, now: a.now, metrics: a.metrics, gatewayRef: a.gateway.ref}
	if err := startServices(m.ctx, deps, a.informers, m.run); err != nil {
		a.log.Error(err, "start the service exchange; services are not exchanged with the peer")
	}
	m.run(func() { a.prober.writeReports(m.ctx, a.conn) })
	m.running = true
}

// sync gathers the facts, plans and applies. It reports whether the tunnel
// is configured.
func (a *Agent) sync(ctx context.Context) bool {
	facts, err := a.facts.gather(ctx, liveFacts{pathMTU: int(a.prober.pathMTU.Load()), standby: !a.lead.active.Load(),
		overlay: a.net.overlay, endpointTurn: func() int { return int(a.prober.endpointTurn.Load()) }})
	if err == nil {
		var p dataplane.GatewayPlan
		if p, err = dataplane.PlanGateway(facts); err == nil {
			p.WireGuard = a.rotation.plan(p.WireGuard)
			if err = a.net.apply(p); err == nil {
				a.prober.applied(p.TunnelMTU, facts.Remote)
				a.conn.dialing(facts.Endpoint)
			}
		}
	}
	a.outcome.Record(err)
	return err == nil || a.net.applied != nil
}

// rotate advances a key rotation under way on the device of an active
// replica, once the measurement runs, and reports where it stands.
func (a *Agent) rotate(ctx context.Context, measuring bool) {
	if !measuring {
		return
	}
	if dev := a.net.tunnel.Device(); dev != nil && a.net.applied != nil && a.lead.active.Load() &&
		a.rotation.step(dev, a.net.applied.WireGuard) {
		a.sync(ctx)
	}
	a.rotation.reportKey(ctx, a.conn, a.net.applied)
}

// measurement runs, from the first configured tunnel of the active replica
// on, what lives as long as the agent: the health prober, the Connection's
// status and the service exchange.
type measurement struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// running is set once they run.
	running bool
}

func newMeasurement() *measurement {
	m := &measurement{}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m
}

// run runs f on a goroutine of the measurement.
func (m *measurement) run(f func()) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
}

// stop stops the measurement and waits for its goroutines.
func (m *measurement) stop() {
	m.cancel()
	m.wg.Wait()
}
