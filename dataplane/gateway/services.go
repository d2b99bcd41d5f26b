package gateway

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/dataplane/resync"
	"github.com/peerlink/peerlink/mcs"
	"github.com/peerlink/peerlink/mcs/exchange"
)

// importsDebounce gathers the peer's changes that come together into one
// write of the imports ConfigMap.
const importsDebounce = 50 * time.Millisecond

// localLimits bound the local export set as the gateway reads it: the
// controller wrote it, so only what a ConfigMap can hold bounds it.
var localLimits = mcs.Limits{Services: 1 << 20, Endpoints: 1 << 20}

// services is the gateway's side of the service exchange: it sends the
// export set the controller wrote in the gateway's namespace to the peer,
// and writes the set the peer sends for the controller to import.
type services struct {
	a  *Agent
	ex *exchange.Exchange

	mu       sync.Mutex
	received mcs.Set
	rejected []mcs.Rejected
	pending  resync.Trigger
}

// startServices starts the exchange over the tunnel: the server listens on
// its tunnel address, the client dials the server's. The exports
// ConfigMap is watched and sent as it changes.
func (a *Agent) startServices(ctx context.Context, wg *sync.WaitGroup) error {
	s := &services{a: a, pending: resync.NewTrigger()}
	s.ex = exchange.New(exchange.Options{OnPeer: s.onPeer, Log: a.log.WithName("services")})
	exports := resync.NewTrigger()
	if err := resync.WatchObjects(ctx, a.informers, exports, &corev1.ConfigMap{}); err != nil {
		return err
	}
	var ln net.Listener
	if a.opts.Role == dataplane.Server {
		var err error
		addr := netip.AddrPortFrom(a.opts.Role.TunnelAddress(), dataplane.ServicesPort)
		if ln, err = freebindListenConfig().Listen(ctx, "tcp4", addr.String()); err != nil {
			return fmt.Errorf("listen on %s: %w", addr, err)
		}
	}
	run := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	run(func() {
		if ln != nil {
			_ = s.ex.Serve(ctx, ln, a.opts.Role.PeerTunnelAddress())
			return
		}
		_ = s.ex.Dial(ctx, a.opts.Role.TunnelAddress(), netip.AddrPortFrom(a.opts.Role.PeerTunnelAddress(), dataplane.ServicesPort))
	})
	run(func() { s.sendLoop(ctx, exports) })
	run(func() { s.writeLoop(ctx) })
	return nil
}

// sendLoop hands the exports ConfigMap to the exchange whenever a
// ConfigMap of the namespace changes.
func (s *services) sendLoop(ctx context.Context, exports resync.Trigger) {
	resync.Tick(ctx, exports, s.a.opts.ResyncInterval)
	for {
		select {
		case <-ctx.Done():
			return
		case <-exports:
		}
		var cm corev1.ConfigMap
		err := s.a.client.Get(ctx, types.NamespacedName{Namespace: s.a.opts.Namespace, Name: mcs.ExportsConfigMap}, &cm)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			s.a.log.Error(err, "read the services to export")
			continue
		}
		set, _, err := mcs.Decode(cm.BinaryData[mcs.DataKey], localLimits)
		if err != nil {
			s.a.log.Error(err, "read the services to export", "configmap", mcs.ExportsConfigMap)
			continue
		}
		s.ex.SetLocal(set)
	}
}

// onPeer keeps the peer's latest set for writeLoop.
func (s *services) onPeer(set mcs.Set, rejected []mcs.Rejected) {
	s.mu.Lock()
	s.received, s.rejected = set, rejected
	s.mu.Unlock()
	s.pending.Notify()
}

// writeLoop writes the peer's set into the imports ConfigMap, a little
// after it changes so that a burst of changes is one write, and again when
// a write failed.
func (s *services) writeLoop(ctx context.Context) {
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
			s.a.log.Error(err, "write the services the peer exports; retrying")
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

func (s *services) write(ctx context.Context, set mcs.Set, rejected []mcs.Rejected) error {
	data, err := mcs.Encode(set)
	if err != nil {
		return err
	}
	for _, r := range rejected {
		s.a.log.Info("a service the peer exports is refused", "service", r.Key.String(), "reason", r.Reason)
	}
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.a.opts.Namespace, Name: mcs.ImportsConfigMap,
			Labels: map[string]string{
				mcs.ExchangeLabel:               mcs.ImportsRole,
				netv1beta1.RemoteClusterIDLabel: s.a.opts.RemoteClusterID,
			},
			Annotations: map[string]string{mcs.RejectedAnnotation: strconv.Itoa(len(rejected))},
		},
		BinaryData: map[string][]byte{mcs.DataKey: data},
	}
	// Owned by the gateway: it goes with the peering.
	if kind, uid := s.a.gatewayRef(); uid != "" {
		cm.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: netv1beta1.GroupVersion.String(), Kind: kind, Name: s.a.opts.Name, UID: types.UID(uid),
		}}
	}
	if err := s.a.client.Patch(ctx, cm, client.Apply, client.FieldOwner(api.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply configmap %s/%s: %w", s.a.opts.Namespace, mcs.ImportsConfigMap, err)
	}
	return nil
}
