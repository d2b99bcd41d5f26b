package gateway

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api"
	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane/resync"
	"github.com/peerlink/peerlink/internal/kube"
)

// Election is how the replicas of a gateway choose the active one: the
// holder of the Lease gw-<gateway> in the gateway's namespace. The others
// stand by with everything ready but the WireGuard peer.
type Election struct {
	// Lock is the Lease, held under PodName.
	Lock resourcelock.Interface
	// Pods writes the active label on the replicas' pods and a server's
	// EndpointSlice; an uncached client, the agent watches neither.
	Pods client.Client
	// PodName names the agent's own pod, in the gateway's namespace.
	PodName string
	// LeaseDuration is how long a standby waits before it takes over
	// from an active replica that stopped renewing (its node gone);
	// RenewDeadline is how long the active keeps trying to renew before
	// it gives up; RetryPeriod is the pace of both, and so the time a
	// standby takes to notice a Lease the active released when it
	// stopped.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// leadership runs the Lease election of a replica and tells the main loop
// what became of it (elected, deposed, superseded, released). Without an
// election the replica is active alone.
type leadership struct {
	// election is nil without one.
	election        *Election
	namespace, name string
	informers       cache.Informers
	log             logr.Logger
	// elected, deposed, superseded and released tell the main loop of the
	// Lease won, not renewed, held by another replica, and let go.
	elected, deposed, superseded, released resync.Trigger
	// active is set once this replica carries the tunnel.
	active atomic.Bool
	// stopElection stops the election running.
	stopElection func()
}

// newLeadership returns the leadership of a replica of the gateway of
// opts, with election, or active at once without.
func newLeadership(election *Election, opts Options, informers cache.Informers, log logr.Logger) *leadership {
	l := &leadership{
		election: election, namespace: opts.Namespace, name: opts.Name, informers: informers, log: log,
		elected: resync.NewTrigger(), deposed: resync.NewTrigger(), superseded: resync.NewTrigger(), released: resync.NewTrigger(),
		stopElection: func() {},
	}
	l.active.Store(election == nil)
	return l
}

// elector returns the Lease elector, which tells the agent through
// l.elected, l.deposed (this replica could not renew the Lease: it may
// have lost it, or the API server may be unreachable) and l.superseded
// (another replica holds it). An elector stopped on purpose (stopped set
// first) does not tell it was deposed: its replacement may already hold
// the Lease, and a restart would release it.
func (l *leadership) elector(stopped *atomic.Bool) (*leaderelection.LeaderElector, error) {
	e := l.election
	return leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            e.Lock,
		Name:            e.Lock.Describe(),
		LeaseDuration:   e.LeaseDuration,
		RenewDeadline:   e.RenewDeadline,
		RetryPeriod:     e.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { l.elected.Notify() },
			OnStoppedLeading: func() {
				if !stopped.Load() {
					l.deposed.Notify()
				}
			},
			OnNewLeader: func(id string) {
				if id != e.PodName {
					l.superseded.Notify()
				}
			},
		},
	})
}

// start watches the Lease for its release and starts the election, when
// the agent has one.
func (l *leadership) start(ctx context.Context) error {
	if l.election != nil {
		if err := l.watchRelease(ctx); err != nil {
			return err
		}
	}
	return l.startElection()
}

// stop releases the Lease if held and waits for the release. It may be
// called more than once.
func (l *leadership) stop() { l.stopElection() }

// restart runs a new election: after a Lease that could not be renewed in
// time, most often because the API server is unreachable, and then no
// other replica can take the Lease either. The tunnel stays as it is (the
// dataplane keeps its state while the API is away): this replica renews
// the Lease if it still names it, and steps down if another replica holds
// it.
func (l *leadership) restart() error {
	l.stop()
	return l.startElection()
}

// onReleased runs a new election on a standby when the active replica let
// the Lease go, so that it tries to take it now rather than at the next
// retry.
func (l *leadership) onReleased() error {
	if l.active.Load() {
		return nil
	}
	return l.restart()
}

// lost reports whether this replica carries the tunnel while another one
// holds the Lease: it must then stop carrying it at once.
func (l *leadership) lost(ctx context.Context) bool {
	return l.active.Load() && l.heldByAnother(ctx)
}

// takeOver makes this replica the active one, and reports whether it was
// not yet.
func (l *leadership) takeOver() bool {
	if l.active.Swap(true) {
		return false
	}
	l.log.Info("holds the Lease: taking over the tunnel", "pod", l.election.PodName)
	return true
}

// activeMarker marks the pod of the replica that carries the tunnel as
// the active one: its label, and a server Service's endpoint.
type activeMarker struct {
	opts     Options
	election *Election
	log      logr.Logger
	// address is the pod's own address, the Service's endpoint.
	address netip.Addr
	// labelled is set once the pod carries the active label.
	labelled bool
}

// markWhile runs sync while it marks the pod active, when it is active and
// not labelled yet: while the sync gives the tunnel its peer, not after,
// since the Service, the controller and every node's fabric take a moment
// to follow, and the former active pod is gone or going. Nor does the label
// wait for the sync to succeed: the controller publishes the server's
// endpoint only once a pod is active, and the peer's key may wait for that
// endpoint. Without an election (m nil) it only runs sync.
func (m *activeMarker) markWhile(ctx context.Context, active bool, sync func()) {
	if m == nil || m.labelled || !active {
		sync()
		return
	}
	marked := make(chan error, 1)
	go func() { marked <- m.markActive(ctx) }()
	sync()
	if err := <-marked; err != nil {
		m.log.Error(err, "label the pod active; retrying")
		return
	}
	m.labelled = true
	m.log.Info("active: this replica carries the tunnel", "pod", m.election.PodName)
}

// markActive makes the agent's pod the server Service's endpoint (see
// publishEndpoint) and puts the active label on it, the two writes at once,
// then takes the label off every other pod of the gateway that still
// carries it (a replica on a node that is gone, whose pod the API still
// shows running): the controller and every node's fabric follow the label,
// and so does a Service that selects it.
func (m *activeMarker) markActive(ctx context.Context) error {
	e := m.election
	var g errgroup.Group
	g.Go(func() error { return m.publishEndpoint(ctx) })
	g.Go(func() error { return patchActive(ctx, e.Pods, m.opts.Namespace, e.PodName, true) })
	if err := g.Wait(); err != nil {
		return err
	}
	var pods corev1.PodList
	if err := e.Pods.List(ctx, &pods, client.InNamespace(m.opts.Namespace),
		client.MatchingLabels{netv1beta1.GatewayNameLabel: m.opts.Name, netv1beta1.ActiveGatewayLabel: "true"}); err != nil {
		return fmt.Errorf("list the active pods of gateway %s/%s: %w", m.opts.Namespace, m.opts.Name, err)
	}
	for _, p := range pods.Items {
		if p.Name == e.PodName {
			continue
		}
		if err := patchActive(ctx, e.Pods, m.opts.Namespace, p.Name, false); err != nil {
			return err
		}
		m.log.Info("took the active label off a former active replica", "pod", p.Name)
	}
	return nil
}

// publishEndpoint makes the agent's pod the one endpoint of the server's
// Service gw-<name> when that Service selects no pods, as the default
// template's does with several replicas: a single write of the
// EndpointSlice gw-<name> replaces the former active pod by this one, so
// kube-proxy moves the peer's flow in its next sync. With a selector on
// the active label instead, the EndpointSlice controller follows the
// deleted pod and the two labels in separate writes, and kube-proxy, which
// syncs at most twice in a burst and then once per second, moves the flow
// only a second later. A Service with a selector is left to the
// EndpointSlice controller, and a client has no Service.
func (m *activeMarker) publishEndpoint(ctx context.Context) error {
	if m.opts.Role != gatewayrole.Server {
		return nil
	}
	c := m.election.Pods
	name := netv1beta1.GatewayObjectPrefix + m.opts.Name
	var svc corev1.Service
	if err := c.Get(ctx, client.ObjectKey{Namespace: m.opts.Namespace, Name: name}, &svc); err != nil {
		return fmt.Errorf("get Service %s/%s: %w", m.opts.Namespace, name, err)
	}
	if len(svc.Spec.Selector) > 0 {
		return nil
	}
	slice := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: discoveryv1.SchemeGroupVersion.String(), Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: m.opts.Namespace,
			Labels:    map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: netv1beta1.GatewayEndpointSliceManager},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Service", Name: name, UID: svc.UID, Controller: ptr.To(true),
			}},
		},
		AddressType: addressType(m.address),
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{m.address.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: m.opts.Namespace, Name: m.election.PodName},
		}},
	}
	for _, p := range svc.Spec.Ports {
		if p.Protocol == corev1.ProtocolUDP {
			slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{
				Name: ptr.To(p.Name), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(int32(m.opts.ListenPort)),
			})
		}
	}
	if err := api.Apply(ctx, c, slice, client.FieldOwner(netv1beta1.GatewayEndpointSliceManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("publish pod %s in EndpointSlice %s/%s: %w", m.election.PodName, m.opts.Namespace, name, err)
	}
	m.log.Info("published this pod as the Service's endpoint", "service", name, "address", m.address)
	return nil
}

// patchActive sets or removes the active label of pod ns/name, and with
// it its deletion cost (kube.ActiveDeletionCost), in one write.
func patchActive(ctx context.Context, c client.Client, ns, name string, active bool) error {
	value, cost := `"true"`, strconv.Quote(kube.ActiveDeletionCost)
	if !active {
		value, cost = "null", "null"
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s},"annotations":{%q:%s}}}`,
		netv1beta1.ActiveGatewayLabel, value, corev1.PodDeletionCost, cost)
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = ns, name
	if err := c.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch)); err != nil && (active || !apierrors.IsNotFound(err)) {
		return fmt.Errorf("label pod %s/%s %s=%v: %w", ns, name, netv1beta1.ActiveGatewayLabel, active, err)
	}
	return nil
}

// watchRelease signals l.released whenever the Lease is released (its
// holder emptied, as a stopping active replica does), read from the
// manager's cache: a standby then tries to take it at once instead of at
// its next retry.
func (l *leadership) watchRelease(ctx context.Context) error {
	name := netv1beta1.GatewayObjectPrefix + l.name
	inf, err := l.informers.GetInformer(ctx, &coordinationv1.Lease{})
	if err != nil {
		return fmt.Errorf("watch Lease %s/%s: %w", l.namespace, name, err)
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if lease, ok := obj.(*coordinationv1.Lease); ok && lease.Name == name && ptr.Deref(lease.Spec.HolderIdentity, "") == "" {
				l.released.Notify()
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watch Lease %s/%s: %w", l.namespace, name, err)
	}
	return nil
}

// heldByAnother reads the Lease from the API and reports whether another
// replica holds it. A notice of another holder may be older than this
// replica's own election (an elector sees the former holder before it
// takes the Lease), so an active replica checks before it steps down; it
// stays when the Lease cannot be read.
func (l *leadership) heldByAnother(ctx context.Context) bool {
	rec, _, err := l.election.Lock.Get(ctx)
	if err != nil {
		l.log.Error(err, "read the Lease; carrying the tunnel on")
		return false
	}
	return rec.HolderIdentity != "" && rec.HolderIdentity != l.election.PodName
}

// startElection runs the Lease election, when the agent has one, until
// stop is called.
func (l *leadership) startElection() error {
	if l.election == nil {
		return nil
	}
	stopped := &atomic.Bool{}
	le, err := l.elector(stopped)
	if err != nil {
		return fmt.Errorf("gateway %s/%s: election: %w", l.namespace, l.name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		le.Run(ctx)
	}()
	l.log.Info("standing by until this replica holds the Lease", "lease", l.election.Lock.Describe(), "pod", l.election.PodName)
	l.stopElection = func() {
		stopped.Store(true)
		cancel()
		<-done
	}
	return nil
}

// addressType is the EndpointSlice address type of a.
func addressType(a netip.Addr) discoveryv1.AddressType {
	if a.Unmap().Is4() {
		return discoveryv1.AddressTypeIPv4
	}
	return discoveryv1.AddressTypeIPv6
}
