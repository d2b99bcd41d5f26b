package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/go-logr/logr"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane/health"
	"github.com/peerlink/peerlink/internal/rangepolicy"
)

// endpointFollower is, on a client, the server's endpoint as the server
// announces it through the tunnel (health.Endpoint): the client sends there
// instead of where its GatewayClient says while the GatewayClient names
// what it named when the announcement came. A server moves (its node port
// or its load balancer changed, its replicas went to other nodes) and
// announces the move while its former endpoint still answers, so the
// client follows without a new exchange of files.
//
// The announcement comes from inside the tunnel, from the peer's tunnel
// address alone, and may point the client's WireGuard traffic nowhere the
// exchanged files could not: an address CheckServerAddr refuses, or one in
// this cluster's own ranges, is not followed.
type endpointFollower struct {
	localRanges []netip.Prefix
	conn        *connectionWriter
	log         logr.Logger

	mu sync.Mutex
	// spec is the endpoint the GatewayClient named at the last read;
	// followed the announced endpoint, over the spec it replaced (both
	// zero while none is followed).
	spec, followed, over health.Endpoint
	// refused is the last announcement not followed, logged once.
	refused health.Endpoint
}

// endpoints returns the endpoints a client sends to, the first usable in
// its turn, when the GatewayClient names spec: the followed one, then
// spec, while spec is the one it replaced; else spec alone.
func (f *endpointFollower) endpoints(spec health.Endpoint) []health.Endpoint {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.spec = spec
	if f.followed.IsZero() {
		return []health.Endpoint{spec}
	}
	if !f.over.Equal(spec) {
		f.log.Info("the GatewayClient names another server endpoint: it replaces the one the server announced", "announced", f.followed, "spec", spec)
		f.followed, f.over = health.Endpoint{}, health.Endpoint{}
		f.persistLocked()
		return []health.Endpoint{spec}
	}
	return []health.Endpoint{f.followed, spec}
}

// announced takes the endpoint the server announced. When it is another
// than the one the client follows, or the GatewayClient names while it
// follows none (as a set of addresses, and a port), and may be followed,
// the client is to follow it from its next plan: announced reports true.
func (f *endpointFollower) announced(e health.Endpoint) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	current := f.spec
	if !f.followed.IsZero() {
		current = f.followed
	}
	if e.IsZero() || f.spec.IsZero() || sameEndpoint(e, current) {
		return false
	}
	if err := f.check(e); err != nil {
		if !sameEndpoint(e, f.refused) {
			f.log.Info("not following the endpoint the server announced", "announced", e, "reason", err.Error())
			f.refused = e
		}
		return false
	}
	if sameEndpoint(e, f.spec) {
		// Back where the GatewayClient says.
		f.followed, f.over = health.Endpoint{}, health.Endpoint{}
	} else {
		f.followed, f.over = e, f.spec
	}
	f.log.Info("the server announced a new endpoint: following it", "from", current, "to", e)
	f.persistLocked()
	return true
}

// check refuses an announced endpoint the client may not send to: an
// address CheckServerAddr refuses, or one in this cluster's own ranges.
func (f *endpointFollower) check(e health.Endpoint) error {
	if err := health.CheckEndpoint(e); err != nil {
		return err
	}
	for _, a := range e.Addresses {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			// A name is resolved, and its addresses judged, when the
			// client sends to it, as a name its GatewayClient holds.
			continue
		}
		if err := rangepolicy.CheckServerAddr(ip); err != nil {
			return err
		}
		if i := slices.IndexFunc(f.localRanges, func(p netip.Prefix) bool { return p.Contains(ip.Unmap()) }); i >= 0 {
			return fmt.Errorf("%s is in this cluster's range %s", a, f.localRanges[i])
		}
	}
	return nil
}

// persistLocked records the followed endpoint on the Connection, for the
// next run; f.mu is held. A write that fails is made again with the next
// change; the endpoint in memory serves until then.
func (f *endpointFollower) persistLocked() {
	value := ""
	if !f.followed.IsZero() {
		b, err := json.Marshal(netv1beta1.FollowedEndpoint{Addresses: f.followed.Addresses, Port: f.followed.Port,
			Over: netv1beta1.AnnouncedEndpoint{Addresses: f.over.Addresses, Port: f.over.Port}})
		if err != nil {
			f.log.Error(err, "encode the followed endpoint")
			return
		}
		value = string(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectionWriteTimeout)
	defer cancel()
	if err := f.conn.persistFollowed(ctx, value); err != nil {
		f.log.Error(err, "record the followed endpoint on the Connection")
	}
}

// restore takes the endpoint a previous run followed from the Connection.
func (f *endpointFollower) restore(ctx context.Context) {
	value, err := f.conn.lastFollowed(ctx)
	if err != nil || value == "" {
		if err != nil {
			f.log.Error(err, "read the followed endpoint")
		}
		return
	}
	fe, err := netv1beta1.ParseFollowedEndpoint(value)
	if err != nil {
		f.log.Error(err, "the Connection's followed endpoint is not followed")
		return
	}
	e := health.Endpoint{Addresses: fe.Addresses, Port: fe.Port}
	if err := f.check(e); err != nil {
		f.log.Error(err, "the Connection's followed endpoint is not followed")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.followed, f.over = e, health.Endpoint{Addresses: fe.Over.Addresses, Port: fe.Over.Port}
	f.log.Info("following the server endpoint a previous run followed", "endpoint", e)
}

// sameEndpoint reports whether a and b have the same port and the same
// addresses, in any order: the order of a server's addresses changes with
// its active replica, which moves nothing.
func sameEndpoint(a, b health.Endpoint) bool {
	if a.Port != b.Port || len(a.Addresses) != len(b.Addresses) {
		return false
	}
	x, y := slices.Clone(a.Addresses), slices.Clone(b.Addresses)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// endpointOf is the endpoint a GatewayServer's status publishes, as a
// server announces it; zero while it publishes none that fits an
// announcement.
func endpointOf(gw *netv1beta1.GatewayServer) health.Endpoint {
	ep := gw.Status.Endpoint
	if ep == nil || ep.Port < 1 || ep.Port > 65535 {
		return health.Endpoint{}
	}
	e := health.Endpoint{Addresses: slices.Clone(ep.Addresses), Port: uint16(ep.Port)}
	if health.CheckEndpoint(e) != nil {
		return health.Endpoint{}
	}
	return e
}
