package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api/gatewayrole"
	ipamv1alpha1 "github.com/peerlink/peerlink/api/ipam/v1alpha1"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/dataplane/health"
	"github.com/peerlink/peerlink/dataplane/kernel"
	"github.com/peerlink/peerlink/dataplane/overlay"
	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/dataplane/resync"
	"github.com/peerlink/peerlink/dataplane/wireguard"
)

// Agent runs one gateway. It is a controller-runtime Runnable: Start runs
// it until its context ends, then removes what it created.
type Agent struct {
	opts      Options
	client    client.Client
	informers cache.Informers
	log       logr.Logger
	now       func() time.Time
	metrics   *metrics

	// Kernel state, touched only by the goroutine of Start.
	kernel       *kernel.Stage
	tunnel       *wireguard.Link
	overlayFacts dataplane.GatewayOverlay
	applied      *dataplane.GatewayPlan
	lastForced   time.Time
	// peerEndpoint is the server's last known endpoint of the client,
	// written into a device that was created anew.
	peerEndpoint netip.AddrPort
	conn         *connectionWriter
	// hosts are the remapped hosts read last from the IP objects.
	hosts []dataplane.IPMapping

	trigger     resync.Trigger
	rehandshake resync.Trigger
	reports     chan health.Report
	outcome     *resync.Outcome

	// election chooses the active replica; nil: this one is, alone.
	election *Election
	// elected, deposed, superseded and released tell the main loop of the
	// Lease won, not renewed, held by another replica, and let go.
	elected, deposed, superseded, released resync.Trigger
	// active is set once this replica carries the tunnel.
	active atomic.Bool

	// endpointTurn counts the times a client moved on to the next of the
	// server's addresses, because pings went unanswered.
	endpointTurn atomic.Int64
	// peerLeft is set, on a client, between the server's goodbye and its
	// next answer: new handshakes may follow each other faster.
	peerLeft atomic.Bool
	// tunnelMTU is the MTU of the applied plan, which the prober's
	// full-size probes take and announces; pathMTU is the prober's last
	// measurement, which the plan clamps TCP to; peerMTU is the MTU the
	// peer announced last (0: unknown).
	tunnelMTU, pathMTU, peerMTU atomic.Int64
	// view is how this side reaches the peer's ranges, from the facts of
	// the last plan applied, which the prober announces to the peer.
	view atomic.Pointer[[]health.Mapping]

	rotation *rotation

	mu         sync.Mutex
	gatewayUID types.UID
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
	m := newMetrics(time.Now)
	a := &Agent{
		opts:        opts,
		client:      c,
		informers:   informers,
		log:         log,
		now:         time.Now,
		metrics:     m,
		rotation:    newRotation(opts, m, time.Now, log),
		trigger:     resync.NewTrigger(),
		rehandshake: resync.NewTrigger(),
		reports:     make(chan health.Report, 1),
		outcome:     resync.NewOutcome(log, "not configuring the tunnel yet", "sync the gateway; retrying"),
		gatewayUID:  opts.GatewayUID,
		election:    election,
		elected:     resync.NewTrigger(),
		deposed:     resync.NewTrigger(),
		superseded:  resync.NewTrigger(),
		released:    resync.NewTrigger(),
	}
	a.active.Store(election == nil)
	return a, nil
}

// Collector exports the agent's metrics.
func (a *Agent) Collector() prometheus.Collector { return a.metrics }

// Ready is the readiness check: the plan is applied and the last sync
// succeeded. It does not wait for the peer to answer: the server's Service
// only sends it traffic once it is ready.
func (a *Agent) Ready(r *http.Request) error { return a.outcome.Ready(r) }

func (a *Agent) setGatewayUID(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if uid != "" {
		a.gatewayUID = uid
	}
}

func (a *Agent) gatewayRef() (string, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.opts.Role == gatewayrole.Server {
		return "GatewayServer", string(a.gatewayUID)
	}
	return "GatewayClient", string(a.gatewayUID)
}

// newGateway returns an empty object of the kind of the agent's gateway.
func (a *Agent) newGateway() client.Object {
	if a.opts.Role == gatewayrole.Server {
		return &netv1beta1.GatewayServer{}
	}
	return &netv1beta1.GatewayClient{}
}

// Start runs the agent until ctx ends.
func (a *Agent) Start(ctx context.Context) error {
	if err := a.initKernel(); err != nil {
		return err
	}
	defer a.kernel.Close()
	if err := resync.WatchObjects(ctx, a.informers, a.trigger, a.newGateway(), &netv1beta1.Configuration{}, &netv1beta1.PublicKey{}); err != nil {
		return err
	}
	// The IPs of every namespace are watched apart: an informer that may
	// not list them yet (the controller grants the gateway that right
	// when it makes it) must not hold up the tunnel.
	go func() {
		if err := resync.WatchObjects(ctx, a.informers, a.trigger, &ipamv1alpha1.IP{}); err != nil && ctx.Err() == nil {
			a.log.Error(err, "remapped hosts are read every resync only")
		}
	}()
	resync.WatchKernel(ctx, a.log, a.trigger)

	var wg sync.WaitGroup
	healthCtx, stopHealth := context.WithCancel(context.Background())
	defer stopHealth()
	prober := false
	a.conn = &connectionWriter{
		c:          a.client,
		name:       netv1beta1.GatewayObjectPrefix + a.opts.Name,
		ns:         a.opts.Namespace,
		clusterID:  a.opts.RemoteClusterID,
		role:       a.opts.Role,
		gatewayRef: a.gatewayRef,
		now:        a.now,
	}
	conn := a.conn
	if a.opts.Role == gatewayrole.Server {
		ep, err := conn.lastEndpoint(ctx)
		if err != nil {
			a.log.Error(err, "read the client's last endpoint")
		}
		a.peerEndpoint = ep
	}
	if key, err := conn.lastPublicKey(ctx); err == nil {
		a.rotation.own.lastKey = key
	} else {
		a.log.Error(err, "read the public key the tunnel ran on")
	}

	if a.election != nil {
		if err := a.watchRelease(ctx); err != nil {
			return err
		}
	}
	stopElection, err := a.startElection()
	if err != nil {
		return err
	}
	defer func() { stopElection() }()
	labelled := false

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
			stopElection()
			stopHealth()
			wg.Wait()
			a.cleanup()
			return nil
		case <-a.trigger:
		case <-a.rehandshake:
			a.forceHandshake()
			continue
		case <-rotationTick.C:
			if prober {
				if a.stepRotation() {
					a.sync(ctx)
				}
				a.rotation.reportKey(ctx, a.conn, a.applied)
			}
			continue
		case <-a.elected:
			a.takeOver(ctx)
		case <-a.deposed:
			// The Lease could not be renewed in time: most often the API
			// server is unreachable, and then no other replica can take
			// the Lease either. The tunnel stays as it is (the dataplane
			// keeps its state while the API is away) and the election
			// starts again: this replica renews the Lease if it still
			// names it, and steps down if another replica holds it.
			stopElection()
			if stopElection, err = a.startElection(); err != nil {
				return err
			}
			continue
		case <-a.released:
			if a.active.Load() {
				continue
			}
			// The active replica let the Lease go: a new election tries
			// to take it now rather than at the next retry.
			stopElection()
			if stopElection, err = a.startElection(); err != nil {
				return err
			}
			continue
		case <-a.superseded:
			if !a.active.Load() || !a.heldByAnother(ctx) {
				continue
			}
			// Another replica holds the Lease: this one must stop
			// carrying the tunnel at once. The pod starts again as a
			// standby.
			stopHealth()
			wg.Wait()
			a.cleanup()
			return fmt.Errorf("lost the Lease of gateway %s/%s: stopped, to start again as a standby", a.opts.Namespace, a.opts.Name)
		}
		var marked chan error
		if !labelled && a.active.Load() && a.election != nil {
			// While the sync gives the tunnel its peer, not after: the
			// Service, the controller and every node's fabric take a
			// moment to follow, and the former active pod is gone or
			// going. Nor does the label wait for the sync to succeed: the
			// controller publishes the server's endpoint only once a pod
			// is active, and the peer's key may wait for that endpoint.
			marked = make(chan error, 1)
			go func() { marked <- a.markActive(ctx) }()
		}
		synced := a.sync(ctx)
		if marked != nil {
			if err := <-marked; err != nil {
				a.log.Error(err, "label the pod active; retrying")
			} else {
				labelled = true
				a.log.Info("active: this replica carries the tunnel", "pod", a.election.PodName)
			}
		}
		if prober {
			a.rotation.reportKey(ctx, a.conn, a.applied)
		}
		if !synced || !a.active.Load() || prober {
			continue
		}
		// The first configured tunnel starts the health measurement and the
		// Connection; both live as long as the agent.
		if err := conn.ensure(ctx); err != nil {
			a.log.Error(err, "create the Connection; retrying")
			continue
		}
		if err := conn.report(ctx, health.Report{State: health.Connecting}); err != nil {
			a.log.Error(err, "write the Connection's status")
		}
		a.rotation.reportKey(ctx, a.conn, a.applied)
		if err := a.startProber(healthCtx, &wg); err != nil {
			a.log.Error(err, "start the health prober; retrying")
			continue
		}
		if err := a.startServices(healthCtx, &wg); err != nil {
			a.log.Error(err, "start the service exchange; services are not exchanged with the peer")
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.writeReports(healthCtx, conn)
		}()
		prober = true
	}
}

// initKernel opens the kernel stage in the current network namespace,
// which picks the overlay kind, and finds the pod's own address.
func (a *Agent) initKernel() error {
	var err error
	if a.kernel, err = kernel.Open(a.opts.Overlay, a.log); err != nil {
		return err
	}
	a.tunnel = wireguard.NewLink(dataplane.TunnelLink, dataplane.LegacyTunnelLink, a.opts.WireGuard, a.log)
	kind := a.kernel.Overlay
	addr, mtu, err := podUnderlay(a.kernel.Handle())
	if err != nil {
		return err
	}
	a.overlayFacts = dataplane.GatewayOverlay{Kind: kind, Address: addr, Node: a.opts.NodeIP, MTU: mtu - overlay.Overhead}
	a.log.Info("overlay", "kind", kind, "port", kind.Port(), "podAddress", addr, "mtu", a.overlayFacts.MTU, "node", a.opts.NodeIP)
	if !a.opts.NodeIP.IsValid() {
		a.log.Info("no node address (--node-ip or NODE_IP): traffic from the tunnel follows the pod's own routes instead of the overlay")
	}
	return nil
}

// podUnderlay returns the pod's address and the MTU of its link: those of
// the link of the IPv4 default route, or of the IPv6 one in a pod without
// IPv4 (an IPv6-only cluster). The overlay runs over that family, whichever
// families it carries.
func podUnderlay(h *netlink.Handle) (netip.Addr, int, error) {
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := h.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return netip.Addr{}, 0, fmt.Errorf("list routes of the main table: %w", err)
		}
		for _, r := range routes {
			if ones, _ := r.Dst.Mask.Size(); r.Dst != nil && ones != 0 {
				continue
			}
			link, err := h.LinkByIndex(r.LinkIndex)
			if err != nil {
				return netip.Addr{}, 0, fmt.Errorf("look up the link of the default route: %w", err)
			}
			addrs, err := h.AddrList(link, family)
			if err != nil {
				return netip.Addr{}, 0, fmt.Errorf("list addresses of %s: %w", link.Attrs().Name, err)
			}
			for _, ad := range addrs {
				if ip, ok := netip.AddrFromSlice(ad.IP); ok && ip.Unmap().IsGlobalUnicast() {
					return ip.Unmap(), link.Attrs().MTU, nil
				}
			}
			return netip.Addr{}, 0, fmt.Errorf("link %s of the default route has no global address", link.Attrs().Name)
		}
	}
	return netip.Addr{}, 0, errors.New("the pod has no default route: cannot tell its own address")
}

// sync gathers the facts, plans and applies. It reports whether the tunnel
// is configured.
func (a *Agent) sync(ctx context.Context) bool {
	facts, err := a.gatherFacts(ctx)
	if err == nil {
		var p dataplane.GatewayPlan
		if p, err = dataplane.PlanGateway(facts); err == nil {
			p.WireGuard = a.rotation.plan(p.WireGuard)
			if err = a.apply(p); err == nil {
				a.view.Store(viewOf(facts.Remote))
			}
		}
	}
	a.outcome.Record(err)
	return err == nil || a.applied != nil
}

// apply writes the plan, the tunnel first, each part compared with the
// kernel first, and reads back what the metrics show.
func (a *Agent) apply(p dataplane.GatewayPlan) error {
	tunnel := func() (bool, error) {
		dev, err := a.tunnel.Ensure(p.TunnelMTU)
		if err != nil {
			return false, err
		}
		return wireguard.Sync(dev, a.withKnownEndpoint(dev, p.WireGuard))
	}
	if err := a.kernel.Apply(p.NetNS, tunnel); err != nil {
		return err
	}
	// The ingress filter counts in each family's table; a metric counts
	// the drops of both.
	if drops, err := a.drops(p); err == nil {
		a.metrics.observeDrops(drops)
	} else {
		a.log.Error(err, "read the ingress filter's counters")
	}
	if dev, err := a.tunnel.Device().Device(); err == nil {
		peer := wireguard.FindPeer(dev, p.WireGuard.Peer.PublicKey)
		a.metrics.observe(a.tunnel.Device().Implementation(), peer)
		a.rememberEndpoint(peer)
	}
	a.applied = &p
	a.tunnelMTU.Store(int64(p.TunnelMTU))
	return nil
}

// drops reads the ingress filter's counters of the tables of p, both
// families' added up.
func (a *Agent) drops(p dataplane.GatewayPlan) (map[string]uint64, error) {
	drops := map[string]uint64{}
	for _, rs := range []plan.Ruleset{p.NAT, p.NAT6} {
		if rs.Empty() {
			continue
		}
		counts, err := a.kernel.Counters(rs.Table, rs.Family)
		if err != nil {
			return nil, fmt.Errorf("table %s %s: %w", rs.Family, rs.Table, err)
		}
		for reason, n := range counts {
			drops[reason] += n
		}
	}
	return drops, nil
}

// stepRotation advances a key rotation under way, on the device of an
// active replica. It reports whether the device is to be configured anew.
func (a *Agent) stepRotation() bool {
	dev := a.tunnel.Device()
	if dev == nil || a.applied == nil || !a.active.Load() {
		return false
	}
	return a.rotation.step(dev, a.applied.WireGuard)
}

// withKnownEndpoint gives a server's device that knows no endpoint for its
// client (it was just created) the last one known, so that it starts the
// handshake at once. An endpoint the device reports is never replaced: the
// client may have roamed.
func (a *Agent) withKnownEndpoint(dev wireguard.Device, cfg plan.WireGuard) plan.WireGuard {
	if a.opts.Role != gatewayrole.Server || !a.peerEndpoint.IsValid() {
		return cfg
	}
	cur, err := dev.Device()
	if err != nil {
		return cfg
	}
	if p := wireguard.FindPeer(cur, cfg.Peer.PublicKey); p != nil && p.Endpoint != nil {
		return cfg
	}
	cfg.Peer.Endpoint = a.peerEndpoint
	return cfg
}

// rememberEndpoint keeps a server's view of its client's endpoint, in
// memory and on the Connection for the next run.
func (a *Agent) rememberEndpoint(peer *wgtypes.Peer) {
	if a.opts.Role != gatewayrole.Server || peer == nil || peer.Endpoint == nil {
		return
	}
	ep := peer.Endpoint.AddrPort()
	ep = netip.AddrPortFrom(ep.Addr().Unmap(), ep.Port())
	if ep == a.peerEndpoint {
		return
	}
	a.peerEndpoint = ep
	// A write that fails is retried with the next change; the endpoint in
	// memory serves until then.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.conn.persistEndpoint(ctx, ep); err != nil {
		a.log.Error(err, "record the client's endpoint on the Connection")
	}
}

// startProber binds the health port on the tunnel address and starts
// pinging the peer. Bound to that address alone, the prober hears nothing
// a local pod sends to the gateway pod's own address. The socket is bound
// with IP_FREEBIND: when the tunnel link is deleted and made again (a
// repair), its address goes and comes back, and the socket keeps working.
// Its packets carry the don't-fragment bit whatever the kernel learnt of
// the path (IP_PMTUDISC_PROBE), so that a probe of the path MTU crosses the
// tunnel whole or not at all.
func (a *Agent) startProber(ctx context.Context, wg *sync.WaitGroup) error {
	addr := netip.AddrPortFrom(dataplane.TunnelAddress(a.opts.Role), dataplane.HealthPort)
	lc := freebindListenConfig()
	freebind := lc.Control
	lc.Control = func(network, address string, c syscall.RawConn) error {
		if err := freebind(network, address, c); err != nil {
			return err
		}
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_PROBE)
		}); err != nil {
			return err
		}
		return serr
	}
	conn, err := lc.ListenPacket(ctx, "udp4", addr.String())
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	p := &health.Prober{
		Conn:      conn,
		Peer:      netip.AddrPortFrom(dataplane.PeerTunnelAddress(a.opts.Role), dataplane.HealthPort),
		Interval:  a.opts.PingInterval,
		MaxMisses: a.opts.MaxMisses,
		MTU:       func() int { return int(a.tunnelMTU.Load()) },
		View:      a.announcedView,
		Accept:    a.rotation.peer.acceptedKeys,
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = p.Run(ctx, a.onReport)
	}()
	return nil
}

// freebindListenConfig binds sockets with IP_FREEBIND, so that they may
// be bound to the tunnel address while the tunnel link is being made again.
func freebindListenConfig() *net.ListenConfig {
	return &net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
}

// onReport runs after each ping interval, and in between when a ping is
// late.
func (a *Agent) onReport(r health.Report) {
	a.rotation.own.setAccepted(r.Accepted)
	if r.Late {
		// A late ping, or the server's goodbye, is a client's first sign
		// of a server replaced by a new pod (kubectl delete, a drain, a
		// rollout): ask for a new handshake now rather than after a whole
		// interval, and again with each late report until the new server
		// answers. It changes nothing of the Connection.
		if a.opts.Role == gatewayrole.Client {
			a.peerLeft.Store(r.PeerLeft)
			a.rehandshake.Notify()
		}
		return
	}
	a.metrics.observeState(r.State)
	if r.State == health.Connected && r.Misses == 0 {
		a.metrics.latency.Observe(r.RTT.Seconds())
	}
	if r.PathMTU > 0 && a.pathMTU.Swap(int64(r.PathMTU)) != int64(r.PathMTU) {
		// The TCP clamp follows the path: plan again.
		a.metrics.observePathMTU(r.PathMTU)
		if r.PathMTU < r.MTU {
			a.log.Info("the path carries less than the tunnel's MTU: TCP is clamped to it, larger packets of other protocols are lost", "pathMTU", r.PathMTU, "mtu", r.MTU)
		} else {
			a.log.Info("the path carries the tunnel's MTU", "pathMTU", r.PathMTU)
		}
		a.trigger.Notify()
	}
	a.metrics.observeMTUs(r.AnnouncedMTU, r.PeerMTU)
	if a.peerMTU.Swap(int64(r.PeerMTU)) != int64(r.PeerMTU) && r.PeerMTU > 0 {
		if r.PeerMTU != r.AnnouncedMTU {
			a.log.Info("the peer's gateway announces another tunnel MTU: both sides must have the same; set the same spec.mtu on both gateways", "mtu", r.AnnouncedMTU, "peerMTU", r.PeerMTU)
		} else {
			a.log.Info("the peer's gateway announces the same tunnel MTU", "mtu", r.AnnouncedMTU)
		}
	}
	// A client whose pings go unanswered while WireGuard believes in its
	// session asks for a new handshake: the server's device may have been
	// recreated (a restarted userspace gateway) and would otherwise drop
	// the old session's packets until WireGuard's own 15-second timeout.
	if a.opts.Role == gatewayrole.Client && r.Misses >= 1 {
		a.rehandshake.Notify()
	}
	// A client whose pings stay unanswered for endpointMisses intervals
	// tries the server's next address: the node behind the first may be
	// gone (a NodePort server lists the nodes of its replicas).
	if a.opts.Role == gatewayrole.Client && r.Misses > 0 && r.Misses%endpointMisses == 0 {
		turn := a.endpointTurn.Add(1)
		a.log.Info("pings unanswered: trying the server's next address, when it has several", "misses", r.Misses, "turn", turn)
		a.trigger.Notify()
	}
	select {
	case <-a.reports:
	default:
	}
	a.reports <- r
}

// viewOf is how this side reaches the peer's ranges: each with the range
// it is remapped to here.
func viewOf(remote []dataplane.RangeMapping) *[]health.Mapping {
	view := make([]health.Mapping, len(remote))
	for i, m := range remote {
		view[i] = health.Mapping{Range: m.Real, SeenAs: m.Remapped}
	}
	return &view
}

// announcedView is the view the prober announces; none before the first
// plan is applied.
func (a *Agent) announcedView() []health.Mapping {
	if v := a.view.Load(); v != nil {
		return *v
	}
	return nil
}

// endpointMisses is the number of pings in a row unanswered after which a
// client moves on to the server's next address.
const endpointMisses = 2

// forceHandshake re-adds the peer, at most once per quarter ping interval
// (the pace of late reports): often enough to catch a replaced server as
// soon as it is up, seldom enough for a handshake, one round trip, to
// complete in between. After the server's goodbye the late reports come
// every health.AfterGoodbye or four round trips, and each one asks.
func (a *Agent) forceHandshake() {
	wait := a.opts.PingInterval / 4
	if a.peerLeft.Load() {
		wait = min(wait, health.AfterGoodbye/2)
	}
	dev := a.tunnel.Device()
	if dev == nil || a.applied == nil || a.now().Sub(a.lastForced) < wait {
		return
	}
	a.lastForced = a.now()
	if err := wireguard.Rehandshake(dev, a.applied.WireGuard); err != nil {
		a.log.Error(err, "force a new handshake")
		return
	}
	a.log.V(1).Info("forced a new handshake: health pings unanswered")
}

// writeReports writes the Connection's status from the health reports.
func (a *Agent) writeReports(ctx context.Context, conn *connectionWriter) {
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-a.reports:
			if err := conn.report(ctx, r); err != nil && ctx.Err() == nil {
				a.log.Error(err, "update the Connection")
			}
		}
	}
}

// cleanup removes what the agent created: the nftables table, the routes
// and rules, the overlay link and the tunnel link.
func (a *Agent) cleanup() {
	if err := errors.Join(a.kernel.Remove(dataplane.GatewayOwned()), a.tunnel.Close()); err != nil {
		a.log.Error(err, "clean up")
		return
	}
	a.log.Info("removed the tunnel, overlay link, routes, rules and nftables table")
}
