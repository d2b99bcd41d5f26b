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

// connectionWriteTimeout bounds a write of the Connection's annotations
// made outside the main loop's context.
const connectionWriteTimeout = 5 * time.Second

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

	mu       sync.Mutex
	created  bool
	endpoint netip.AddrPort
	// followed is, on a client, the value of netv1beta1.FollowedEndpointAnnotation:
	// empty while it follows no announced endpoint.
	followed string
	// dialed is, on a client, the server's endpoint its tunnel sends to.
	dialed     netip.AddrPort
	generation int64
	// status is the status as last written.
	status connectionStatus
}

// connectionStatus is what a Connection's status says, and since when.
type connectionStatus struct {
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
	// announce through the tunnel (peerMTU zero while unknown);
	// mtuTransition is when they last started or stopped differing.
	announcedMTU, peerMTU int
	mtuTransition         time.Time
	// peerView is how the peer reaches this cluster's ranges (nil while
	// unknown).
	peerView []health.Mapping
	// dialed is, on a client, the server's endpoint the tunnel sends to,
	// which the status names while the server does not answer.
	dialed netip.AddrPort
	// publicKey is the public key the tunnel runs on, and rotation where
	// a rotation of this side's key stood, since rotationTransition.
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
	return persist(ctx, w, &w.endpoint, ep)
}

// persistFollowed records, on a client, the server endpoint it follows
// (netv1beta1.FollowedEndpointAnnotation; empty for none) when it changed.
func (w *connectionWriter) persistFollowed(ctx context.Context, value string) error {
	return persist(ctx, w, &w.followed, value)
}

// persist sets field, one of w's annotations, to v and applies the
// Connection when it changed and the Connection exists (ensure applies it
// with the rest otherwise); a failed apply leaves field as it was.
func persist[T comparable](ctx context.Context, w *connectionWriter, field *T, v T) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if v == *field {
		return nil
	}
	old := *field
	*field = v
	if !w.created {
		return nil
	}
	if err := w.apply(ctx); err != nil {
		*field = old
		return err
	}
	return nil
}

// lastFollowed reads the followed endpoint a previous run recorded; empty
// when there is none.
func (w *connectionWriter) lastFollowed(ctx context.Context) (string, error) {
	var conn netv1beta1.Connection
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: w.name}, &conn); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	value := conn.Annotations[netv1beta1.FollowedEndpointAnnotation]
	w.mu.Lock()
	defer w.mu.Unlock()
	w.followed = value
	return value, nil
}

// dialing records, on a client, the server's endpoint the tunnel sends to;
// the next status written names it while the server does not answer.
func (w *connectionWriter) dialing(ep netip.AddrPort) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dialed = ep
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
	if key == w.status.publicKey && phase == w.status.rotation {
		return nil
	}
	now := w.now()
	if w.status.value == "" {
		// Before the first health report: the status says what the
		// agent says first.
		w.status.value, w.status.transition = health.Connecting, now
	}
	next := w.status
	next.publicKey = key
	if phase.reason != w.status.rotation.reason {
		next.rotationTransition = now
	}
	next.rotation = phase
	if err := w.writeStatus(ctx, next, now); err != nil {
		return err
	}
	w.status = next
	return nil
}

// apply writes the Connection's metadata and spec; w.mu is held.
func (w *connectionWriter) apply(ctx context.Context) error {
	kind, uid := w.gatewayRef()
	annotations := map[string]any{}
	if w.endpoint.IsValid() {
		annotations[PeerEndpointAnnotation] = w.endpoint.String()
	}
	if w.followed != "" {
		annotations[netv1beta1.FollowedEndpointAnnotation] = w.followed
	}
	u := connectionObject(w.name, w.ns, w.clusterID, w.role, kind, uid, annotations)
	if err := w.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(api.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply Connection %s/%s: %w", w.ns, w.name, err)
	}
	w.generation = u.GetGeneration()
	w.created = true
	return nil
}

// connectionObject is the metadata and spec of the Connection ns/name of
// the gateway of kind and uid (empty: not known yet), of the peer
// clusterID, with the given annotations.
func connectionObject(name, ns, clusterID string, role gatewayrole.Role, kind, uid string, annotations map[string]any) *unstructured.Unstructured {
	gatewayName := name[len(netv1beta1.GatewayObjectPrefix):]
	metadata := map[string]any{
		"name":      name,
		"namespace": ns,
		"labels":    map[string]any{netv1beta1.RemoteClusterIDLabel: clusterID},
	}
	if len(annotations) > 0 {
		metadata["annotations"] = annotations
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
		"namespace":  ns,
	}
	if uid != "" {
		ref["uid"] = uid
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": netv1beta1.GroupVersion.String(),
		"kind":       "Connection",
		"metadata":   metadata,
		"spec":       map[string]any{"type": string(netv1beta1.ConnectionTypeOf(role)), "gatewayRef": ref},
	}}
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
	next, changed := w.status.after(r, now)
	// A client that moves on to another of the server's addresses while
	// the server does not answer names the new one.
	if w.dialed != w.status.dialed {
		next.dialed = w.dialed
		changed = changed || r.State != health.Connected
	}
	if !changed {
		return nil
	}
	// A new value's transition is kept even when the write fails.
	w.status.transition = next.transition
	if err := w.writeStatus(ctx, next, now); err != nil {
		return err
	}
	w.status = next
	return nil
}

// after returns the status after the health report r at now, and whether
// it is to be written: its value, a new path MTU and a change of the MTUs
// announced or of the peer's view at once, a changed latency only
// latencyPeriod after the last one written.
func (s connectionStatus) after(r health.Report, now time.Time) (connectionStatus, bool) {
	latency := ""
	if r.RTT > 0 {
		latency = r.RTT.Round(10 * time.Microsecond).String()
	}
	valueChanged := r.State != s.value
	latencyDue := latency != s.latency && now.Sub(s.latencyWritten) >= latencyPeriod
	pathChanged := r.PathMTU > 0 && (r.PathMTU != s.pathMTU || r.MTU != s.mtu)
	mtusChanged := r.PeerMTU != s.peerMTU || r.AnnouncedMTU != s.announcedMTU
	viewChanged := !slices.Equal(r.PeerView, s.peerView)
	if !valueChanged && !latencyDue && !pathChanged && !mtusChanged && !viewChanged {
		return s, false
	}
	next := s
	if valueChanged {
		next.transition = now
	}
	if pathChanged && (s.pathMTU == 0 || (r.PathMTU < r.MTU) != (s.pathMTU < s.mtu)) {
		next.pathTransition = now
	}
	if r.PathMTU > 0 {
		next.pathMTU, next.mtu = r.PathMTU, r.MTU
	}
	if mtusChanged && (s.peerMTU == 0 || (r.PeerMTU != r.AnnouncedMTU) != (s.peerMTU != s.announcedMTU)) {
		next.mtuTransition = now
	}
	next.announcedMTU, next.peerMTU, next.peerView = r.AnnouncedMTU, r.PeerMTU, r.PeerView
	next.value = r.State
	next.latency, next.latencyWritten = latency, now
	return next, true
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

// movedHint is what a client's status adds while the server does not
// answer: the endpoint it sends to, and how to tell whether the server
// moved and follow it. A server's endpoint changes when its node is
// replaced or its NodePort or load-balancer address changes, and nothing
// inside a tunnel that is down can carry the new one.
func (s connectionStatus) movedHint() string {
	if !s.dialed.IsValid() {
		return ""
	}
	return fmt.Sprintf("; this gateway sends to the server at %s. If the server's endpoint changed (its node replaced, "+
		"its NodePort or load-balancer address changed), `peerlink info peer <this cluster's ID> --get network.gateway` "+
		"on the server's cluster prints the one it has now: a GatewayClient made with it, applied here, follows it", s.dialed)
}

// writeStatus writes the status s, at now; w.mu is held.
func (w *connectionWriter) writeStatus(ctx context.Context, s connectionStatus, now time.Time) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": netv1beta1.GroupVersion.String(),
		"kind":       "Connection",
		"metadata":   map[string]any{"name": w.name, "namespace": w.ns},
		"status":     s.object(w.generation, now),
	}}
	if err := w.c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(api.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("write status of Connection %s/%s: %w", w.ns, w.name, err)
	}
	return nil
}

// object is the status as the Connection of the given generation holds it,
// written at now.
func (s connectionStatus) object(generation int64, now time.Time) map[string]any {
	var ready, reconciling map[string]any
	switch s.value {
	case health.Connected:
		ready = condition(netv1beta1.ConditionReady, generation, s.transition, "True", "Connected", "health pings through the tunnel are answered")
		reconciling = condition(netv1beta1.ConditionReconciling, generation, s.transition, "False", "Connected", "the tunnel is up")
	case health.Error:
		ready = condition(netv1beta1.ConditionReady, generation, s.transition, "False", "PingsUnanswered", "health pings through the tunnel go unanswered"+s.movedHint())
		reconciling = condition(netv1beta1.ConditionReconciling, generation, s.transition, "True", "PingsUnanswered", "the gateway keeps trying")
	default:
		ready = condition(netv1beta1.ConditionReady, generation, s.transition, "False", "Connecting", "no health ping has been answered yet"+s.movedHint())
		reconciling = condition(netv1beta1.ConditionReconciling, generation, s.transition, "True", "Connecting", "waiting for the peer")
	}
	status := map[string]any{
		"observedGeneration": generation,
		"value":              string(s.value),
	}
	if s.latency != "" {
		status["latency"] = map[string]any{"value": s.latency, "timestamp": now.UTC().Format(time.RFC3339)}
	}
	if s.publicKey != (plan.Key{}) {
		status["publicKey"] = s.publicKey.String()
	}
	conditions := []any{ready, reconciling}
	if s.pathMTU > 0 {
		status["pathMTU"] = int64(s.pathMTU)
		conditions = append(conditions, pathCondition(s.pathMTU, s.mtu, generation, s.pathTransition))
	}
	if s.peerMTU > 0 {
		status["peerMTU"] = int64(s.peerMTU)
		if s.announcedMTU > 0 {
			conditions = append(conditions, mtuCondition(s.announcedMTU, s.peerMTU, generation, s.mtuTransition))
		}
	}
	if s.peerView != nil {
		view := make([]any, len(s.peerView))
		for i, m := range s.peerView {
			view[i] = map[string]any{"cidr": m.Range.String(), "seenAs": m.SeenAs.String()}
		}
		status["peerView"] = view
	}
	if s.rotation.reason != "" {
		conditions = append(conditions, condition(netv1beta1.ConditionKeyRotation, generation, s.rotationTransition,
			"True", s.rotation.reason, s.rotation.message))
	}
	status["conditions"] = conditions
	return status
}
