package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/dataplane/resync"
	"github.com/peerlink/peerlink/mcs"
	"github.com/peerlink/peerlink/mcs/exchange"
	"github.com/peerlink/peerlink/mcs/store"
)

// importsDebounce gathers the peer's changes that come together into one
// write of the imports shards.
const importsDebounce = 50 * time.Millisecond

// localLimits bound the local export set as the gateway reads it: the
// controller wrote it, so only what its shards can hold bounds it.
var localLimits = mcs.Limits{Services: 1 << 20, Endpoints: 1 << 20, EndpointGroups: 1 << 20, MetadataBytes: 1 << 30,
	TotalEndpoints: 1 << 30, TotalEndpointGroups: 1 << 30, TotalMetadataBytes: 1 << 30, DocumentBytes: 64 << 20, EncodedBytes: 1 << 30}

// serviceDeps are what the parts of the service exchange take of the
// agent.
type serviceDeps struct {
	opts    Options
	client  client.Client
	log     logr.Logger
	now     func() time.Time
	metrics *metrics
	// gatewayRef is the kind and UID of the gateway, the owner of the
	// imports shards.
	gatewayRef func() (kind string, uid string)
}

// services is the gateway's side of the service exchange: it sends the
// export set the controller wrote in the gateway's namespace to the peer,
// and has imports write the set the peer sends for the controller to
// import.
type services struct {
	serviceDeps
	ex      *exchange.Exchange
	imports *imports

	// sentVersion is the version of the exports shards last handed to
	// the exchange: an unchanged set is not decoded again.
	sentVersion string
	// exports decodes the exports shards, each again only when it
	// changed.
	exports mcs.ShardDecoder
}

// imports writes the set the peer sends into the imports shards (mcs/store).
type imports struct {
	serviceDeps
	// limits bound the peer's set, here as in the controller.
	limits mcs.Limits

	mu       sync.Mutex
	received mcs.Set
	rejected []mcs.Rejected
	pending  resync.Trigger

	// Only writeLoop reads and writes these.
	//
	// seen is when this gateway first saw each service of the peer's
	// set, and as which type: a service that leaves the set, or changes
	// type, is seen anew. It is kept in the imports shards, which
	// holds it across restarts.
	seen firstSights
	// logged are the rejections last logged and counted, by service.
	logged map[mcs.Key]mcs.Rejected
	// encoder encodes the shards, within the limits, each compressed
	// again only when its services change.
	encoder mcs.ShardEncoder
}

// newImports returns the writer of the peer's set, with when each service
// was first seen read back from the imports shards.
func newImports(ctx context.Context, deps serviceDeps) *imports {
	im := &imports{serviceDeps: deps, pending: resync.NewTrigger(), limits: deps.opts.ServiceLimits.WithDefaults(), logged: map[mcs.Key]mcs.Rejected{}}
	im.encoder.Limits = &im.limits
	im.seen = im.readSeen(ctx)
	return im
}

// firstSight is when a service was first seen, and as which type.
type firstSight struct {
	at  time.Time
	typ string
}

// firstSights are the first sights of the services of the peer's set.
type firstSights map[mcs.Key]firstSight

// startServices starts the exchange over the tunnel, until ctx ends: the
// server listens on its tunnel address, the client dials the server's.
// The exports shards, which informers watch, is sent as it changes. run
// runs the exchange's goroutines.
func startServices(ctx context.Context, deps serviceDeps, informers cache.Informers, run func(func())) error {
	s := &services{serviceDeps: deps, imports: newImports(ctx, deps)}
	s.ex = exchange.New(exchange.Options{OnPeer: s.imports.onPeer, OnRefused: deps.metrics.observeRefused, Log: deps.log.WithName("services"),
		Limits: s.imports.limits, Now: deps.now})
	exports := resync.NewTrigger()
	if err := resync.WatchObjects(ctx, informers, exports, &corev1.ConfigMap{}); err != nil {
		return err
	}
	role := deps.opts.Role
	var ln net.Listener
	if role == gatewayrole.Server {
		var err error
		addr := netip.AddrPortFrom(dataplane.TunnelAddress(role), dataplane.ServicesPort)
		if ln, err = freebindListenConfig().Listen(ctx, "tcp4", addr.String()); err != nil {
			return fmt.Errorf("listen on %s: %w", addr, err)
		}
	}
	run(func() {
		if ln != nil {
			_ = s.ex.Serve(ctx, ln, dataplane.PeerTunnelAddress(role))
			return
		}
		_ = s.ex.Dial(ctx, dataplane.TunnelAddress(role), netip.AddrPortFrom(dataplane.PeerTunnelAddress(role), dataplane.ServicesPort))
	})
	run(func() { s.sendLoop(ctx, exports) })
	run(func() { s.imports.writeLoop(ctx) })
	return nil
}

// sendLoop hands the exports shards to the exchange whenever a
// ConfigMap of the namespace changes.
func (s *services) sendLoop(ctx context.Context, exports resync.Trigger) {
	resync.Tick(ctx, exports, s.opts.ResyncInterval)
	for {
		select {
		case <-ctx.Done():
			return
		case <-exports:
		}
		stored, err := store.Read(ctx, s.client, s.opts.Namespace, mcs.ExportsConfigMap, mcs.ExportsRole)
		if apierrors.IsNotFound(err) || errors.Is(err, store.ErrIncomplete) {
			// The controller has not written them yet, or not every
			// shard: its next write triggers another read.
			continue
		}
		if err != nil {
			s.log.Error(err, "read the services to export")
			continue
		}
		if stored.Version == s.sentVersion {
			continue
		}
		set, _, err := s.exports.Decode(stored.Shards, localLimits, s.now())
		if err != nil {
			s.log.Error(err, "read the services to export", "configmap", mcs.ExportsConfigMap)
			continue
		}
		s.ex.SetLocal(set)
		s.sentVersion = stored.Version
	}
}

// readSeen reads when the services in the imports shards were first
// seen, as this gateway (or the one before it) wrote it.
func (s *imports) readSeen(ctx context.Context) firstSights {
	seen := firstSights{}
	stored, err := store.Read(ctx, s.client, s.opts.Namespace, mcs.ImportsConfigMap, mcs.ImportsRole)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			s.log.Error(err, "read when the peer's services were first seen; they count as seen now")
		}
		return seen
	}
	set, _, err := mcs.DecodeShards(stored.Shards, s.limits, s.now())
	if err != nil {
		s.log.Error(err, "read when the peer's services were first seen; they count as seen now")
		return seen
	}
	for k, svc := range set {
		if !svc.Seen.IsZero() {
			seen[k] = firstSight{at: svc.Seen, typ: string(svc.Type)}
		}
	}
	return seen
}

// stamp returns the set with when each service was first seen, now for
// those not seen before, and forgets those no longer in it.
func (seen firstSights) stamp(set mcs.Set, now time.Time) mcs.Set {
	// Seconds, as the API keeps a ServiceExport's creation time: within
	// the same second, this cluster's own export is first.
	now = now.UTC().Truncate(time.Second)
	out := make(mcs.Set, len(set))
	for k, svc := range set {
		f, ok := seen[k]
		if !ok || f.typ != string(svc.Type) {
			// A service that changes type is another export: it cannot
			// flip an import it was in.
			f = firstSight{at: now, typ: string(svc.Type)}
			seen[k] = f
		}
		svc.Seen = f.at
		out[k] = svc
	}
	for k := range seen {
		if _, ok := set[k]; !ok {
			delete(seen, k)
		}
	}
	return out
}

// onPeer keeps the peer's latest set for writeLoop.
func (s *imports) onPeer(set mcs.Set, rejected []mcs.Rejected) {
	s.mu.Lock()
	s.received, s.rejected = set, rejected
	s.mu.Unlock()
	s.pending.Notify()
}

// writeLoop writes the peer's set into the imports shards, a little
// after it changes so that a burst of changes is one write, and again when
// a write failed.
func (s *imports) writeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.pending:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(importsDebounce):
		}
		s.mu.Lock()
		set, rejected := s.received, s.rejected
		s.mu.Unlock()
		if err := s.write(ctx, set, rejected); err != nil {
			s.log.Error(err, "write the services the peer exports; retrying")
			go func() {
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
					s.pending.Notify()
				}
			}()
		}
	}
}

// write stores the peer's set in the imports shards, each service with
// when it was first seen, each shard within the bounds the controller
// reads it with (the services past them, in key order, are rejected), and
// what was rejected of it.
func (s *imports) write(ctx context.Context, set mcs.Set, rejected []mcs.Rejected) error {
	set = s.seen.stamp(set, s.now())
	marshalled, err := mcs.Marshal(set)
	if err != nil {
		return err
	}
	previous, err := store.Count(ctx, s.client, s.opts.Namespace, mcs.ImportsConfigMap, mcs.ImportsRole)
	if err != nil {
		return err
	}
	shards, trimmed, err := s.encoder.Encode(marshalled, marshalled.Count(previous))
	if err != nil {
		return err
	}
	for _, r := range trimmed {
		delete(s.seen, r.Key)
	}
	rejected = slices.SortedFunc(slices.Values(append(slices.Clone(rejected), trimmed...)), func(a, b mcs.Rejected) int { return a.Key.Compare(b.Key) })
	s.report(rejected)
	summary, err := json.Marshal(mcs.Summarize(rejected))
	if err != nil {
		return err
	}
	t := store.Target{
		Namespace: s.opts.Namespace, Name: mcs.ImportsConfigMap,
		Labels: map[string]string{
			mcs.ExchangeLabel:               mcs.ImportsRole,
			netv1beta1.RemoteClusterIDLabel: s.opts.RemoteClusterID,
		},
		Annotations: map[string]string{
			mcs.RejectedAnnotation:        strconv.Itoa(len(rejected)),
			mcs.RejectedSummaryAnnotation: string(summary),
		},
	}
	// Owned by the gateway: they go with the peering.
	if kind, uid := s.gatewayRef(); uid != "" {
		t.Owners = []metav1.OwnerReference{{
			APIVersion: netv1beta1.GroupVersion.String(), Kind: kind, Name: s.opts.Name, UID: types.UID(uid),
		}}
	}
	return store.Write(ctx, s.client, t, shards)
}

// report logs and counts the services rejected of the peer's set once
// each, when they are first rejected or for another reason: the same
// rejections in the next set are neither logged nor counted again.
func (s *imports) report(rejected []mcs.Rejected) {
	now := make(map[mcs.Key]mcs.Rejected, len(rejected))
	for _, r := range rejected {
		now[r.Key] = r
		if s.logged[r.Key] == r {
			continue
		}
		s.log.Info("a service the peer exports is refused", "service", r.Key.String(), "rule", r.Rule, "reason", r.Reason)
		s.metrics.observeRejectedService(r.Rule)
	}
	if !maps.Equal(now, s.logged) {
		s.log.Info("the services the peer exports that are refused changed", "refused", len(now), "before", len(s.logged))
	}
	s.metrics.observeRejected(len(rejected))
	s.logged = now
}
