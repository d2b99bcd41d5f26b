package gateway

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api"
	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane/health"
	"github.com/peerlink/peerlink/dataplane/plan"
)

// latencyPeriod is the most often a changed latency alone is written.
const latencyPeriod = 10 * time.Second

// PeerEndpointAnnotation, on a server's Connection, is the client's last
// endpoint as WireGuard reported it. A restarted server (a new userspace
// device knows no endpoint) writes it back into its fresh device, which then
// starts the handshake itself instead of waiting for the client to notice.
const PeerEndpointAnnotation = "peerlink.io/peer-endpoint"

// connectionWriter keeps the Connection gw-<gateway> up to date from the
// health reports, writing only what changed: the value at once, the latency
// at most every latencyPeriod.
type connectionWriter struct {
	c          client.Client
	name, ns   string
	clusterID  string
	role       gatewayrole.Role
	gatewayRef func() (kind string, uid string)
	now        func() time.Time

	mu             sync.Mutex
	created        bool
	endpoint       netip.AddrPort
	generation     int64
	value          health.State
	transition     time.Time
	latency        string
	latencyWritten time.Time
	// pathMTU and mtu are the path MTU written and the configured MTU it
	// was measured against; pathTransition is when the path last went
	// below the configured MTU or back.
	pathMTU, mtu   int
	pathTransition time.Time
	// announcedMTU and peerMTU are the MTUs this side and the peer
	// announce through the tunnel, as last written (peerMTU zero while
	// unknown); mtuTransition is when they last started or stopped
	// differing.
	announcedMTU, peerMTU int
	// peerView is how the peer reaches this cluster's ranges, as last
	// written (nil while unknown).
	peerView      []health.Mapping
	mtuTransition time.Time
	// publicKey is the public key the tunnel runs on, as last written,
	// and rotation where a rotation of this side's key stood, since
	// rotationTransition.
	publicKey          plan.Key
	rotation           keyRotationPhase
	rotationTransition time.Time
}

// ensure applies the Connection's metadata and spec once.
func (w *connectionWriter) ensure(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.created {
		return nil
	}
	return w.apply(ctx)
}

// persistEndpoint records the peer's endpoint on the Connection when it
// changed.
func (w *connectionWriter) persistEndpoint(ctx context.Context, ep netip.AddrPort) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ep == w.endpoint {
		return nil
	}
	old := w.endpoint
	w.endpoint = ep
	if !w.created {
		// ensure writes it with the rest.
		return nil
	}
	if err := w.apply(ctx); err != nil {
		w.endpoint = old
		return err
	}
	return nil
}

// lastEndpoint reads the endpoint a previous run recorded; invalid when
// there is none.
func (w *connectionWriter) lastEndpoint(ctx context.Context) (netip.AddrPort, error) {
	var conn netv1beta1.Connection
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: w.name}, &conn); err != nil {
		return netip.AddrPort{}, client.IgnoreNotFound(err)
	}
	s, ok := conn.Annotations[PeerEndpointAnnotation]
	if !ok {
		return netip.AddrPort{}, nil
	}
	ep, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("annotation %s of Connection %s/%s: %w", PeerEndpointAnnotation, w.ns, w.name, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.endpoint = ep
	return ep, nil
}

// lastPublicKey reads the public key the tunnel ran on in a previous run;
// zero when none was written.
func (w *connectionWriter) lastPublicKey(ctx context.Context) (plan.Key, error) {
	var conn netv1beta1.Connection
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: w.name}, &conn); err != nil {
		return plan.Key{}, client.IgnoreNotFound(err)
	}
	if len(conn.Status.PublicKey) == 0 {
		return plan.Key{}, nil
	}
	k, err := plan.NewKey(conn.Status.PublicKey)
	if err != nil {
		return plan.Key{}, fmt.Errorf("status.publicKey of Connection %s/%s: %w", w.ns, w.name, err)
	}
	return k, nil
}

// reportKey writes the public key the tunnel runs on, and where a
// rotation of this side's key stands, when they changed.
func (w *connectionWriter) reportKey(ctx context.Context, key plan.Key, phase keyRotationPhase) error {
	if err := w.ensure(ctx); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if key == w.publicKey && phase == w.rotation {
		return nil
	}
	old, oldPhase, oldTransition := w.publicKey, w.rotation, w.rotationTransition
	w.publicKey = key
	now := w.now()
	if phase.reason != w.rotation.reason {
		w.rotationTransition = now
	}
	w.rotation = phase
	if w.value == "" {
		// Before the first health report: the status says what the
		// agent says first.
		w.value, w.transition = health.Connecting, now
	}
	if err := w.writeStatus(ctx, w.value, w.latency, w.pathMTU, w.mtu, w.pathTransition, now); err != nil {
		w.publicKey, w.rotation, w.rotationTransition = old, oldPhase, oldTransition
		return err
	}
	return nil
}

// apply writes the Connection's metadata and spec; w.mu is held.
func (w *connectionWriter) apply(ctx context.Context) error {
	kind, uid := w.gatewayRef()
	gatewayName := w.name[len(netv1beta1.GatewayObjectPrefix):]
	metadata := map[string]any{
		"name":      w.name,
		"namespace": w.ns,
		"labels":    map[string]any{netv1beta1.RemoteClusterIDLabel: w.clusterID},
	}
	if w.endpoint.IsValid() {
		metadata["annotations"] = map[string]any{PeerEndpointAnnotation: w.endpoint.String()}
	}
	if uid != "" {
		metadata["ownerReferences"] = []any{map[string]any{
			"apiVersion": netv1beta1.GroupVersion.String(),
			"kind":       kind,
			"name":       gatewayName,
			"uid":        uid,
		}}
	}
	ref := map[string]any{
		"apiVersion": netv1beta1.GroupVersion.String(),
		"kind":       kind,
		"name":       gatewayName,
		"namespace":  w.ns,
	}
	if uid != "" {
		ref["uid"] = uid
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": netv1beta1.GroupVersion.String(),
		"kind":       "Connection",
		"metadata":   metadata,
		"spec":       map[string]any{"type": string(netv1beta1.ConnectionTypeOf(w.role)), "gatewayRef": ref},
	}}
	if err := w.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(api.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply Connection %s/%s: %w", w.ns, w.name, err)
	}
	w.generation = u.GetGeneration()
	w.created = true
	return nil
}

// report writes the status a health report calls for, if any: the value,
// a new path MTU and a change of the MTUs announced at once, the latency
// at most every latencyPeriod.
func (w *connectionWriter) report(ctx context.Context, r health.Report) error {
	if err := w.ensure(ctx); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	latency := ""
	if r.RTT > 0 {
		latency = r.RTT.Round(10 * time.Microsecond).String()
	}
	valueChanged := r.State != w.value
	latencyDue := latency != w.latency && now.Sub(w.latencyWritten) >= latencyPeriod
	pathChanged := r.PathMTU > 0 && (r.PathMTU != w.pathMTU || r.MTU != w.mtu)
	mtusChanged := r.PeerMTU != w.peerMTU || r.AnnouncedMTU != w.announcedMTU
	viewChanged := !slices.Equal(r.PeerView, w.peerView)
	if !valueChanged && !latencyDue && !pathChanged && !mtusChanged && !viewChanged {
		return nil
	}
	if valueChanged {
		w.transition = now
	}
	pathTransition := w.pathTransition
	if pathChanged && (w.pathMTU == 0 || (r.PathMTU < r.MTU) != (w.pathMTU < w.mtu)) {
		pathTransition = now
	}
	pathMTU, mtu := w.pathMTU, w.mtu
	if r.PathMTU > 0 {
		pathMTU, mtu = r.PathMTU, r.MTU
	}
	oldAnnounced, oldPeer, oldMTUTransition := w.announcedMTU, w.peerMTU, w.mtuTransition
	if mtusChanged && (w.peerMTU == 0 || (r.PeerMTU != r.AnnouncedMTU) != (w.peerMTU != w.announcedMTU)) {
		w.mtuTransition = now
	}
	oldView := w.peerView
	w.announcedMTU, w.peerMTU, w.peerView = r.AnnouncedMTU, r.PeerMTU, r.PeerView
	if err := w.writeStatus(ctx, r.State, latency, pathMTU, mtu, pathTransition, now); err != nil {
		w.announcedMTU, w.peerMTU, w.mtuTransition, w.peerView = oldAnnounced, oldPeer, oldMTUTransition, oldView
		return err
	}
	w.value = r.State
	w.latency, w.latencyWritten = latency, now
	w.pathMTU, w.mtu, w.pathTransition = pathMTU, mtu, pathTransition
	return nil
}

// condition is a status condition of the given type, written as it is
// applied to the Connection.
func condition(condType string, generation int64, transition time.Time, status, reason, message string) map[string]any {
	return map[string]any{
		"type":               condType,
		"observedGeneration": generation,
		"lastTransitionTime": transition.UTC().Format(time.RFC3339),
		"status":             status,
		"reason":             reason,
		"message":            message,
	}
}

// pathCondition is the PathMTUReduced condition of a measured path.
func pathCondition(pathMTU, mtu int, generation int64, transition time.Time) map[string]any {
	if pathMTU < mtu {
		return condition(netv1beta1.ConditionPathMTUReduced, generation, transition, "True", "BelowConfigured",
			fmt.Sprintf("the path carries packets of at most %d bytes through the tunnel, less than the configured MTU of %d: "+
				"TCP is clamped to it, larger packets of other protocols are lost; lower spec.mtu of the gateways or widen the path", pathMTU, mtu))
	}
	return condition(netv1beta1.ConditionPathMTUReduced, generation, transition, "False", "AsConfigured",
		fmt.Sprintf("probes of the configured MTU (%d bytes) cross the tunnel", mtu))
}

// mtuCondition is the MTUMismatch condition of the MTUs both sides
// announce.
func mtuCondition(announced, peer int, generation int64, transition time.Time) map[string]any {
	if peer != announced {
		return condition(netv1beta1.ConditionMTUMismatch, generation, transition, "True", "DifferentMTU",
			fmt.Sprintf("this gateway's tunnel MTU is %d bytes, the peer's gateway announces %d: both sides must have the same MTU; "+
				"set the same spec.mtu on the GatewayServer and the GatewayClient", announced, peer))
	}
	return condition(netv1beta1.ConditionMTUMismatch, generation, transition, "False", "SameMTU",
		fmt.Sprintf("the peer's gateway announces the same tunnel MTU as this one, %d bytes", announced))
}

func (w *connectionWriter) writeStatus(ctx context.Context, value health.State, latency string, pathMTU, mtu int, pathTransition, now time.Time) error {
	var ready, reconciling map[string]any
	switch value {
	case health.Connected:
		ready = condition(netv1beta1.ConditionReady, w.generation, w.transition, "True", "Connected", "health pings through the tunnel are answered")
		reconciling = condition(netv1beta1.ConditionReconciling, w.generation, w.transition, "False", "Connected", "the tunnel is up")
	case health.Error:
		ready = condition(netv1beta1.ConditionReady, w.generation, w.transition, "False", "PingsUnanswered", "health pings through the tunnel go unanswered")
		reconciling = condition(netv1beta1.ConditionReconciling, w.generation, w.transition, "True", "PingsUnanswered", "the gateway keeps trying")
	default:
		ready = condition(netv1beta1.ConditionReady, w.generation, w.transition, "False", "Connecting", "no health ping has been answered yet")
		reconciling = condition(netv1beta1.ConditionReconciling, w.generation, w.transition, "True", "Connecting", "waiting for the peer")
	}
	status := map[string]any{
		"observedGeneration": w.generation,
		"value":              string(value),
	}
	if latency != "" {
		status["latency"] = map[string]any{"value": latency, "timestamp": now.UTC().Format(time.RFC3339)}
	}
	if w.publicKey != (plan.Key{}) {
		status["publicKey"] = w.publicKey.String()
	}
	conditions := []any{ready, reconciling}
	if pathMTU > 0 {
		status["pathMTU"] = int64(pathMTU)
		conditions = append(conditions, pathCondition(pathMTU, mtu, w.generation, pathTransition))
	}
	if w.peerMTU > 0 {
		status["peerMTU"] = int64(w.peerMTU)
		if w.announcedMTU > 0 {
			conditions = append(conditions, mtuCondition(w.announcedMTU, w.peerMTU, w.generation, w.mtuTransition))
		}
	}
	if w.peerView != nil {
		view := make([]any, len(w.peerView))
		for i, m := range w.peerView {
			view[i] = map[string]any{"cidr": m.Range.String(), "seenAs": m.SeenAs.String()}
		}
		status["peerView"] = view
	}
	if w.rotation.reason != "" {
		conditions = append(conditions, condition(netv1beta1.ConditionKeyRotation, w.generation, w.rotationTransition,
			"True", w.rotation.reason, w.rotation.message))
	}
	status["conditions"] = conditions
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": netv1beta1.GroupVersion.String(),
		"kind":       "Connection",
		"metadata":   map[string]any{"name": w.name, "namespace": w.ns},
		"status":     status,
	}}
	if err := w.c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(api.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("write status of Connection %s/%s: %w", w.ns, w.name, err)
	}
	return nil
}
