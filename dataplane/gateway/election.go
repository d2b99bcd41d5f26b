package gateway

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api"
	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
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

// elector returns the Lease elector, which tells the agent through
// a.elected, a.deposed (this replica could not renew the Lease: it may
// have lost it, or the API server may be unreachable) and a.superseded
// (another replica holds it). An elector stopped on purpose (stopped set
// first) does not tell it was deposed: its replacement may already hold
// the Lease, and a restart would release it.
func (a *Agent) elector(stopped *atomic.Bool) (*leaderelection.LeaderElector, error) {
	e := a.election
	return leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            e.Lock,
		Name:            e.Lock.Describe(),
		LeaseDuration:   e.LeaseDuration,
		RenewDeadline:   e.RenewDeadline,
		RetryPeriod:     e.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { a.elected.Notify() },
			OnStoppedLeading: func() {
				if !stopped.Load() {
					a.deposed.Notify()
				}
			},
			OnNewLeader: func(id string) {
				if id != e.PodName {
					a.superseded.Notify()
				}
			},
		},
	})
}

// markActive makes the agent's pod the server Service's endpoint (see
// publishEndpoint) and puts the active label on it, the two writes at once,
// then takes the label off every other pod of the gateway that still
// carries it (a replica on a node that is gone, whose pod the API still
// shows running): the controller and every node's fabric follow the label,
// and so does a Service that selects it.
func (a *Agent) markActive(ctx context.Context) error {
	e := a.election
	var g errgroup.Group
	g.Go(func() error { return a.publishEndpoint(ctx) })
	g.Go(func() error { return patchActive(ctx, e.Pods, a.opts.Namespace, e.PodName, true) })
	if err := g.Wait(); err != nil {
		return err
	}
	var pods corev1.PodList
	if err := e.Pods.List(ctx, &pods, client.InNamespace(a.opts.Namespace),
		client.MatchingLabels{netv1beta1.GatewayNameLabel: a.opts.Name, netv1beta1.ActiveGatewayLabel: "true"}); err != nil {
		return fmt.Errorf("list the active pods of gateway %s/%s: %w", a.opts.Namespace, a.opts.Name, err)
	}
	for _, p := range pods.Items {
		if p.Name == e.PodName {
			continue
		}
		if err := patchActive(ctx, e.Pods, a.opts.Namespace, p.Name, false); err != nil {
			return err
		}
		a.log.Info("took the active label off a former active replica", "pod", p.Name)
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
func (a *Agent) publishEndpoint(ctx context.Context) error {
	if a.opts.Role != gatewayrole.Server {
		return nil
	}
	c := a.election.Pods
	name := netv1beta1.GatewayObjectPrefix + a.opts.Name
	var svc corev1.Service
	if err := c.Get(ctx, client.ObjectKey{Namespace: a.opts.Namespace, Name: name}, &svc); err != nil {
		return fmt.Errorf("get Service %s/%s: %w", a.opts.Namespace, name, err)
	}
	if len(svc.Spec.Selector) > 0 {
		return nil
	}
	slice := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: discoveryv1.SchemeGroupVersion.String(), Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: a.opts.Namespace,
			Labels:    map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: netv1beta1.GatewayEndpointSliceManager},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Service", Name: name, UID: svc.UID, Controller: ptr.To(true),
			}},
		},
		AddressType: addressType(a.overlayFacts.Address),
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{a.overlayFacts.Address.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: a.opts.Namespace, Name: a.election.PodName},
		}},
	}
	for _, p := range svc.Spec.Ports {
		if p.Protocol == corev1.ProtocolUDP {
			slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{
				Name: ptr.To(p.Name), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(int32(a.opts.ListenPort)),
			})
		}
	}
	if err := api.Apply(ctx, c, slice, client.FieldOwner(netv1beta1.GatewayEndpointSliceManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("publish pod %s in EndpointSlice %s/%s: %w", a.election.PodName, a.opts.Namespace, name, err)
	}
	a.log.Info("published this pod as the Service's endpoint", "service", name, "address", a.overlayFacts.Address)
	return nil
}

// patchActive sets or removes the active label of pod ns/name.
func patchActive(ctx context.Context, c client.Client, ns, name string, active bool) error {
	value := `"true"`
	if !active {
		value = "null"
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s}}}`, netv1beta1.ActiveGatewayLabel, value)
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = ns, name
	if err := c.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch)); err != nil && (active || !apierrors.IsNotFound(err)) {
		return fmt.Errorf("label pod %s/%s %s=%v: %w", ns, name, netv1beta1.ActiveGatewayLabel, active, err)
	}
	return nil
}

// watchRelease signals a.released whenever the Lease is released (its
// holder emptied, as a stopping active replica does), read from the
// manager's cache: a standby then tries to take it at once instead of at
// its next retry.
func (a *Agent) watchRelease(ctx context.Context) error {
	name := netv1beta1.GatewayObjectPrefix + a.opts.Name
	inf, err := a.informers.GetInformer(ctx, &coordinationv1.Lease{})
	if err != nil {
		return fmt.Errorf("watch Lease %s/%s: %w", a.opts.Namespace, name, err)
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if l, ok := obj.(*coordinationv1.Lease); ok && l.Name == name && ptr.Deref(l.Spec.HolderIdentity, "") == "" {
				a.released.Notify()
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watch Lease %s/%s: %w", a.opts.Namespace, name, err)
	}
	return nil
}

// heldByAnother reads the Lease from the API and reports whether another
// replica holds it. A notice of another holder may be older than this
// replica's own election (an elector sees the former holder before it
// takes the Lease), so an active replica checks before it steps down; it
// stays when the Lease cannot be read.
func (a *Agent) heldByAnother(ctx context.Context) bool {
	rec, _, err := a.election.Lock.Get(ctx)
	if err != nil {
		a.log.Error(err, "read the Lease; carrying the tunnel on")
		return false
	}
	return rec.HolderIdentity != "" && rec.HolderIdentity != a.election.PodName
}

// startElection runs the Lease election, when the agent has one, until the
// returned stop is called: stop releases the Lease if held and waits for
// the release. It may be called more than once.
func (a *Agent) startElection() (stop func(), err error) {
	if a.election == nil {
		return func() {}, nil
	}
	stopped := &atomic.Bool{}
	le, err := a.elector(stopped)
	if err != nil {
		return nil, fmt.Errorf("gateway %s/%s: election: %w", a.opts.Namespace, a.opts.Name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		le.Run(ctx)
	}()
	a.log.Info("standing by until this replica holds the Lease", "lease", a.election.Lock.Describe(), "pod", a.election.PodName)
	return func() {
		stopped.Store(true)
		cancel()
		<-done
	}, nil
}

// takeOver makes this replica the active one: the main loop then marks it
// active, and the next sync gives the tunnel its peer. A server takes the
// client's last endpoint from the Connection, as the former active replica
// recorded it, so that its new device starts the handshake itself.
func (a *Agent) takeOver(ctx context.Context) {
	if a.active.Swap(true) {
		return
	}
	a.log.Info("holds the Lease: taking over the tunnel", "pod", a.election.PodName)
	if a.opts.Role != gatewayrole.Server {
		return
	}
	ep, err := a.conn.lastEndpoint(ctx)
	if err != nil {
		a.log.Error(err, "read the client's last endpoint")
		return
	}
	if ep.IsValid() {
		a.peerEndpoint = ep
	}
}

// addressType is the EndpointSlice address type of a.
func addressType(a netip.Addr) discoveryv1.AddressType {
	if a.Unmap().Is4() {
		return discoveryv1.AddressTypeIPv4
	}
	return discoveryv1.AddressTypeIPv6
}
