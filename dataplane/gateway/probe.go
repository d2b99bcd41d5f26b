package gateway

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"

	"github.com/peerlink/peerlink/api/gatewayrole"
	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/dataplane/health"
	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/dataplane/resync"
	"github.com/peerlink/peerlink/dataplane/wireguard"
)

// endpointMisses is the number of pings in a row unanswered after which a
// client moves on to the server's next address.
const endpointMisses = 2

// prober measures the tunnel with health pings (package health) and turns
// its reports into metrics, into requests of the main loop (plan again,
// force a handshake) and into the Connection's status (writeReports). The
// main loop sets what it announces (applied); the rest is written by the
// prober's goroutine and read atomically.
type prober struct {
	role      gatewayrole.Role
	interval  time.Duration
	maxMisses int
	log       logr.Logger
	now       func() time.Time
	metrics   *metrics
	// setAccepted takes the keys of this side the peer accepts; accepts
	// are the peer's keys this side announces it accepts.
	setAccepted func([]plan.Key)
	accepts     func() []plan.Key
	// replan asks the main loop to plan again, rehandshake to force a new
	// handshake; reports holds the latest report for writeReports.
	replan, rehandshake resync.Trigger
	reports             chan health.Report

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
	// endpoint returns, on a server, the endpoint it announces; follow
	// takes, on a client, the endpoint the server announced. Each is nil
	// on the other role.
	endpoint func() health.Endpoint
	follow   func(health.Endpoint) bool
	// ignored returns the health prober's counts of ignored packets; nil
	// until it starts.
	ignored func() map[string]uint64
	// view is how this side reaches the peer's ranges, from the facts of
	// the last plan applied, which the prober announces to the peer.
	view atomic.Pointer[[]health.Mapping]

	// lastForced is when forceHandshake last asked; the main loop's.
	lastForced time.Time
}

// newProber returns the prober of an agent with opts, which asks for a
// sync through replan and takes and gives keys of a rotation r.
func newProber(opts Options, replan resync.Trigger, r *rotation, m *metrics, now func() time.Time, log logr.Logger) *prober {
	return &prober{
		role: opts.Role, interval: opts.PingInterval, maxMisses: opts.MaxMisses, log: log, now: now, metrics: m,
		setAccepted: r.own.setAccepted, accepts: r.peer.acceptedKeys,
		replan: replan, rehandshake: resync.NewTrigger(), reports: make(chan health.Report, 1),
	}
}

// applied records what the prober announces of the plan applied last: its
// tunnel MTU, and how this side reaches the peer's ranges.
func (p *prober) applied(mtu int, remote []dataplane.RangeMapping) {
	p.tunnelMTU.Store(int64(mtu))
	p.view.Store(viewOf(remote))
}

// start binds the health port on the tunnel address and starts pinging
// the peer, until ctx ends; run runs the prober's goroutine. Bound to that
// address alone, the prober hears nothing a local pod sends to the gateway
// pod's own address.
func (p *prober) start(ctx context.Context, run func(func())) error {
	addr := netip.AddrPortFrom(dataplane.TunnelAddress(p.role), dataplane.HealthPort)
	conn, err := probeListenConfig().ListenPacket(ctx, "udp4", addr.String())
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	hp := &health.Prober{
		Conn:      conn,
		Peer:      netip.AddrPortFrom(dataplane.PeerTunnelAddress(p.role), dataplane.HealthPort),
		Interval:  p.interval,
		MaxMisses: p.maxMisses,
		MTU:       func() int { return int(p.tunnelMTU.Load()) },
		View:      p.announcedView,
		Endpoint:  p.endpoint,
		Accept:    p.accepts,
	}
	p.ignored = hp.Ignored
	run(func() { _ = hp.Run(ctx, p.onReport) })
	return nil
}

// onReport runs after each ping interval, and in between when a ping is
// late.
func (p *prober) onReport(r health.Report) {
	p.setAccepted(r.Accepted)
	if p.ignored != nil {
		p.metrics.observeIgnored(p.ignored())
	}
	if r.Late {
		// A late ping, or the server's goodbye, is a client's first sign
		// of a server replaced by a new pod (kubectl delete, a drain, a
		// rollout): ask for a new handshake now rather than after a whole
		// interval, and again with each late report until the new server
		// answers. It changes nothing of the Connection.
		if p.role == gatewayrole.Client {
			p.peerLeft.Store(r.PeerLeft)
			p.rehandshake.Notify()
		}
		return
	}
	p.metrics.observeState(r.State)
	if r.State == health.Connected && r.Misses == 0 {
		p.metrics.latency.Observe(r.RTT.Seconds())
	}
	p.observeMTUs(r)
	// A client that follows a new endpoint of the server tries it first.
	if p.follow != nil && r.State == health.Connected && p.follow(r.PeerEndpoint) {
		p.endpointTurn.Store(0)
		p.replan.Notify()
	}
	// A client whose pings go unanswered while WireGuard believes in its
	// session asks for a new handshake: the server's device may have been
	// recreated (a restarted userspace gateway) and would otherwise drop
	// the old session's packets until WireGuard's own 15-second timeout.
	if p.role == gatewayrole.Client && r.Misses >= 1 {
		p.rehandshake.Notify()
	}
	// A client whose pings stay unanswered for endpointMisses intervals
	// tries the server's next address: the node behind the first may be
	// gone (a NodePort server lists the nodes of its replicas).
	if p.role == gatewayrole.Client && r.Misses > 0 && r.Misses%endpointMisses == 0 {
		turn := p.endpointTurn.Add(1)
		p.log.Info("pings unanswered: trying the server's next address, when it has several", "misses", r.Misses, "turn", turn)
		p.replan.Notify()
	}
	select {
	case <-p.reports:
	default:
	}
	p.reports <- r
}

// observeMTUs takes the path MTU measured and the MTUs both sides
// announce of r: a new path MTU asks for a new plan, whose TCP clamp
// follows the path.
func (p *prober) observeMTUs(r health.Report) {
	if r.PathMTU > 0 && p.pathMTU.Swap(int64(r.PathMTU)) != int64(r.PathMTU) {
		p.metrics.observePathMTU(r.PathMTU)
		if r.PathMTU < r.MTU {
			p.log.Info("the path carries less than the tunnel's MTU: TCP is clamped to it, larger packets of other protocols are lost", "pathMTU", r.PathMTU, "mtu", r.MTU)
		} else {
			p.log.Info("the path carries the tunnel's MTU", "pathMTU", r.PathMTU)
		}
		p.replan.Notify()
	}
	p.metrics.observeMTUs(r.AnnouncedMTU, r.PeerMTU)
	if p.peerMTU.Swap(int64(r.PeerMTU)) != int64(r.PeerMTU) && r.PeerMTU > 0 {
		if r.PeerMTU != r.AnnouncedMTU {
			p.log.Info("the peer's gateway announces another tunnel MTU: both sides must have the same; set the same spec.mtu on both gateways", "mtu", r.AnnouncedMTU, "peerMTU", r.PeerMTU)
		} else {
			p.log.Info("the peer's gateway announces the same tunnel MTU", "mtu", r.AnnouncedMTU)
		}
	}
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
func (p *prober) announcedView() []health.Mapping {
	if v := p.view.Load(); v != nil {
		return *v
	}
	return nil
}

// forceHandshake re-adds the peer of dev, as applied, at most once per
// quarter ping interval (the pace of late reports): often enough to catch
// a replaced server as soon as it is up, seldom enough for a handshake,
// one round trip, to complete in between. After the server's goodbye the
// late reports come every health.AfterGoodbye or four round trips, and
// each one asks.
func (p *prober) forceHandshake(dev wireguard.Device, applied *dataplane.GatewayPlan) {
	wait := p.interval / 4
	if p.peerLeft.Load() {
		wait = min(wait, health.AfterGoodbye/2)
	}
	if dev == nil || applied == nil || p.now().Sub(p.lastForced) < wait {
		return
	}
	p.lastForced = p.now()
	if err := wireguard.Rehandshake(dev, applied.WireGuard); err != nil {
		p.log.Error(err, "force a new handshake")
		return
	}
	p.log.V(1).Info("forced a new handshake: health pings unanswered")
}

// writeReports writes the Connection's status from the health reports.
func (p *prober) writeReports(ctx context.Context, conn *connectionWriter) {
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-p.reports:
			if err := conn.report(ctx, r); err != nil && ctx.Err() == nil {
				p.log.Error(err, "update the Connection")
			}
		}
	}
}

// probeListenConfig binds the prober's socket with IP_FREEBIND (see
// freebindListenConfig), and sends its packets with the don't-fragment bit
// whatever the kernel learnt of the path (IP_PMTUDISC_PROBE), so that a
// probe of the path MTU crosses the tunnel whole or not at all.
func probeListenConfig() *net.ListenConfig {
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
	return lc
}

// freebindListenConfig binds sockets with IP_FREEBIND, so that they may
// be bound to the tunnel address while the tunnel link is being made again:
// when the tunnel link is deleted and made again (a repair), its address
// goes and comes back, and the socket keeps working.
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
