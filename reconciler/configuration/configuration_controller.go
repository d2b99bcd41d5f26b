package configuration

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/internal/rangepolicy"
	"github.com/peerlink/peerlink/ipam"
	"github.com/peerlink/peerlink/reconciler/outcome"
)

// Reasons of the conditions of a Configuration.
const (
	// ReasonDuplicateRemoteClusterID: an older Configuration declares the
	// same peer.
	ReasonDuplicateRemoteClusterID = "DuplicateRemoteClusterID"
	// ReasonInvalidCIDR: a CIDR of spec.remote is not a network.
	ReasonInvalidCIDR = "InvalidCIDR"
	// ReasonOverlappingCIDRs: two CIDRs of spec.remote overlap.
	ReasonOverlappingCIDRs = "OverlappingCIDRs"
	// ReasonPoolExhausted: the pools have no free block for a CIDR that must
	// be remapped. Retried every poolExhaustedRetry, as another peer's
	// deletion may free one.
	ReasonPoolExhausted = "PoolExhausted"
	// ReasonUnsupportedAddressFamily: a CIDR of spec.remote is of no
	// family peerlink routes (rangepolicy.RuleFamily). IPv4 and IPv6
	// ranges are both routed, each remapped within its own family.
	ReasonUnsupportedAddressFamily = "UnsupportedAddressFamily"
	// ReasonRefusedCIDR: a CIDR of spec.remote is one this cluster never
	// routes to a peer: special-use (IPv4 or IPv6), or outside the
	// allowlist (--allowed-peer-cidr; IPv6 global unicast needs an entry).
	ReasonRefusedCIDR = "RefusedCIDR"
)

const (
	// poolExhaustedRetry is how often a Configuration waiting for a free
	// range is tried again.
	poolExhaustedRetry = time.Minute
	// remoteClusterIDIndex indexes Configurations by their peer's ID.
	remoteClusterIDIndex = "metadata.labels.remoteClusterID"
)

// Reconciler gives each peer's CIDRs, declared in a
// Configuration's spec.remote, the local ranges they are seen under, and
// records them in status.remote, index-aligned with spec.remote.
//
// The ranges are persisted in status.remote only. The reconciler keeps them
// in an ipam.Ledger in memory, which it rebuilds from the status of every
// Configuration before its first reconcile answers (see loadLedger), so a
// restarted controller or a new leader holds exactly the ranges the API
// shows. Deleting a Configuration frees its ranges: its reconcile finds it
// gone and releases them, and a controller that was not running when it went
// simply never reads them back. No finalizer is needed, so deleting a
// Configuration never hangs, whether or not a controller runs.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	// Defaults to the manager's client.
	Client client.Client
	// Options are what the reconciler knows of this cluster.
	Options Options
	// Recorder emits events. Defaults to one of the manager.
	Recorder record.EventRecorder

	// mu guards ledger, loaded and reserved: workers may reconcile
	// concurrently.
	mu     sync.Mutex
	ledger *ipam.Ledger
	loaded bool
	// reserved are the addresses the ledger's allocator holds besides the
	// local ranges: node addresses and gateway endpoints, which change
	// while the controller runs.
	reserved []netip.Prefix
}

// Reconcile brings the ranges held for one Configuration in line with its
// spec and records them and the outcome in its status. A Configuration
// gone or going away (another party's finalizer holds it) no longer needs
// its ranges, and its status is of no further use.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := r.loadLedger(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.refreshReserved(ctx); err != nil {
		return ctrl.Result{}, err
	}
	flow := outcome.Flow[*netv1beta1.Configuration]{
		New:        func() *netv1beta1.Configuration { return &netv1beta1.Configuration{} },
		Conditions: func(c *netv1beta1.Configuration) *netv1beta1.CommonStatus { return &c.Status.CommonStatus },
		Status:     func(c *netv1beta1.Configuration) any { return c.Status },
		Gone:       r.release,
		Record:     setCIDRsConfigured,
		Changed:    r.event,
	}
	return flow.Reconcile(ctx, r.Client, req.NamespacedName, r.reconcile)
}

// reconcile runs the steps for a Configuration that exists: check who the
// peer is, read its CIDRs, give them ranges and write those into status.
func (r *Reconciler) reconcile(ctx context.Context, conf *netv1beta1.Configuration) (outcome.Outcome, error) {
	key := client.ObjectKeyFromObject(conf)
	wants, err := r.checkInput(ctx, conf)
	var se *outcome.StallError
	if errors.As(err, &se) {
		// A Configuration that cannot be served holds no ranges, so none is
		// kept for a peer that cannot be connected.
		r.release(key)
		conf.Status.Remote = nil
	}
	if err != nil {
		return outcome.Outcome{}, err
	}
	got, err := r.assign(key, wants)
	if err != nil {
		conf.Status.Remote = nil
		return outcome.Outcome{}, err
	}
	conf.Status.Remote = ipam.RemoteStatus(len(conf.Spec.Remote.CIDR.Pod), got)
	return outcome.Ready(describeRanges(conf)), nil
}

// checkInput checks the peer's ID and CIDRs and returns the CIDRs, pod CIDRs
// first, then external ones.
func (r *Reconciler) checkInput(ctx context.Context, conf *netv1beta1.Configuration) ([]netip.Prefix, error) {
	id, err := outcome.RemoteClusterID(conf, r.Options.ClusterID)
	if err != nil {
		return nil, err
	}
	if err := r.checkUnique(ctx, conf, id); err != nil {
		return nil, err
	}
	return parseRemoteCIDRs(conf.Spec.Remote.CIDR, r.Options.PeerPolicy)
}

// checkUnique stalls conf when an older Configuration (by creation time,
// then name, then namespace) declares the same peer: that one is the peer's.
func (r *Reconciler) checkUnique(ctx context.Context, conf *netv1beta1.Configuration, id string) error {
	var list netv1beta1.ConfigurationList
	if err := r.Client.List(ctx, &list, client.MatchingFields{remoteClusterIDIndex: id}); err != nil {
		return fmt.Errorf("list configurations of remote cluster %s: %w", id, err)
	}
	for i := range list.Items {
		other := &list.Items[i]
		if other.UID != conf.UID && other.DeletionTimestamp.IsZero() && older(other, conf) {
			return outcome.Stall(ReasonDuplicateRemoteClusterID,
				"Configuration %s/%s already declares remote cluster %s: delete one of the two",
				other.Namespace, other.Name, id)
		}
	}
	return nil
}

// older orders Configurations by creation time, then name, then namespace.
func older(a, b *netv1beta1.Configuration) bool {
	return compareAge(a, b) < 0
}

func compareAge(a, b *netv1beta1.Configuration) int {
	return cmp.Or(
		a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time),
		strings.Compare(a.Name, b.Name),
		strings.Compare(a.Namespace, b.Namespace))
}

// parseRemoteCIDRs parses the peer's pod and external CIDRs, which must be
// networks (no host bits) of either family that the policy accepts, and
// must not overlap each other. Errors name the field and the rule.
func parseRemoteCIDRs(c netv1beta1.ClusterConfigCIDR, policy rangepolicy.Policy) ([]netip.Prefix, error) {
	var (
		out   []netip.Prefix
		field []string
	)
	for _, l := range []struct {
		name  string
		cidrs []netv1beta1.CIDR
	}{{"pod", c.Pod}, {"external", c.External}} {
		for i, s := range l.cidrs {
			f := fmt.Sprintf("spec.remote.cidr.%s[%d]", l.name, i)
			p, err := cidr.ParseNetwork(string(s))
			if err != nil {
				return nil, outcome.Stall(ReasonInvalidCIDR, "%s: %q is not a network in CIDR notation: %v", f, s, err)
			}
			if err := policy.Check(p); err != nil {
				return nil, refusal(f, err)
			}
			out = append(out, p)
			field = append(field, f)
		}
	}
	if len(c.Pod) == 0 {
		return nil, outcome.Stall(ReasonInvalidCIDR, "spec.remote.cidr.pod: at least one CIDR is required")
	}
	if i, j, ok := cidr.FirstOverlap(out); ok {
		return nil, outcome.Stall(ReasonOverlappingCIDRs, "%s %s overlaps %s %s: a peer's CIDRs must be disjoint",
			field[j], out[j], field[i], out[i])
	}
	return out, nil
}

// refusal stalls a Configuration whose field holds a range the policy
// refused.
func refusal(field string, err error) error {
	reason := ReasonRefusedCIDR
	var ref *rangepolicy.Refusal
	if errors.As(err, &ref) && ref.Rule == rangepolicy.RuleFamily {
		reason = ReasonUnsupportedAddressFamily
	}
	return outcome.Stall(reason, "%s: %v", field, err)
}

// assign makes the ledger hold a range for each of wants for the
// Configuration key.
func (r *Reconciler) assign(key types.NamespacedName, wants []netip.Prefix) ([]netip.Prefix, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	got, err := r.ledger.Assign(key.String(), wants)
	if errors.Is(err, ipam.ErrExhausted) {
		return nil, outcome.StallRetry(poolExhaustedRetry, ReasonPoolExhausted, "%v: delete a peer or add a pool (--ipam-pool)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("assign ranges: %w", err)
	}
	return got, nil
}

// release frees the ranges held for the Configuration key.
func (r *Reconciler) release(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ledger.Release(key.String())
}

// loadLedger rebuilds the ledger, once, from the status.remote of every
// Configuration, oldest first, so the ranges held are those the API shows.
// It runs before the first reconcile answers; the cache it reads is synced
// by then, and nothing was written by this process yet.
//
// status.remote[i] is paired with spec.remote[i], as the API defines. Should
// the spec have changed while no controller ran, a range stays paired with
// the CIDR now at its position when their lengths agree (the next reconcile
// keeps it) and is otherwise held until that reconcile releases it.
func (r *Reconciler) loadLedger(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.loaded {
		return nil
	}
	reserved, err := r.listReserved(ctx)
	if err != nil {
		return err
	}
	alloc, err := r.allocator(reserved)
	if err != nil {
		return err
	}
	r.ledger, r.reserved = ipam.NewLedger(alloc), reserved
	var list netv1beta1.ConfigurationList
	if err := r.Client.List(ctx, &list); err != nil {
		return fmt.Errorf("list configurations to rebuild the ipam: %w", err)
	}
	confs := make([]*netv1beta1.Configuration, 0, len(list.Items))
	for i := range list.Items {
		if c := &list.Items[i]; c.Status.Remote != nil && c.DeletionTimestamp.IsZero() {
			confs = append(confs, c)
		}
	}
	slices.SortFunc(confs, compareAge)
	log := ctrl.LoggerFrom(ctx)
	for _, c := range confs {
		entries := recordedEntries(c)
		if kept := r.ledger.Restore(client.ObjectKeyFromObject(c).String(), entries); len(kept) != len(entries) {
			log.Info("recorded ranges overlap local ranges, node addresses, gateway endpoints or older peers; they get new ones",
				"configuration", client.ObjectKeyFromObject(c), "recorded", len(entries), "kept", len(kept))
		}
	}
	r.loaded = true
	log.Info("rebuilt ipam from configuration status", "configurations", len(confs))
	return nil
}

// recordedEntries are the ranges a Configuration's status.remote records,
// as the ledger restores them (see Configuration.RecordedRanges).
func recordedEntries(c *netv1beta1.Configuration) []ipam.Entry {
	var out []ipam.Entry
	for _, r := range c.RecordedRanges() {
		out = append(out, ipam.Entry{Want: r.Real, Got: r.Remapped})
	}
	return out
}

// setCIDRsConfigured sets the NetworkCIDRsConfigured condition of the Liqo
// API, which follows Ready.
func setCIDRsConfigured(conf *netv1beta1.Configuration, o outcome.Outcome) {
	s := metav1.ConditionFalse
	if o.State == outcome.StateReady {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&conf.Status.Conditions, metav1.Condition{
		Type:               netv1beta1.ConditionNetworkCIDRsConfigured,
		Status:             s,
		Reason:             o.Reason,
		Message:            o.Message,
		ObservedGeneration: conf.Generation,
	})
}

// event reports a changed outcome on the Configuration.
func (r *Reconciler) event(conf *netv1beta1.Configuration, o outcome.Outcome) {
	kind := corev1.EventTypeNormal
	if o.State != outcome.StateReady {
		kind = corev1.EventTypeWarning
	}
	r.Recorder.Event(conf, kind, o.Reason, o.Message)
}

// describeRanges says how the peer's CIDRs are seen, for the Ready message.
func describeRanges(conf *netv1beta1.Configuration) string {
	ranges, err := conf.RemoteRanges()
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, r := range ranges {
		if r.Remapped == r.Real {
			parts = append(parts, fmt.Sprintf("%s kept", r.Real))
		} else {
			parts = append(parts, fmt.Sprintf("%s remapped to %s", r.Real, r.Remapped))
		}
	}
	return "remote CIDRs " + strings.Join(parts, ", ")
}

// SetupWithManager registers the reconciler with mgr: an index of
// Configurations by peer ID, and watches that bring back the other
// Configurations of a peer when one of them comes, goes or changes peer.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Recorder == nil {
		// controller-runtime 0.25 deprecates this core/v1 recorder for
		// one of events.k8s.io/v1, which takes other RBAC and another call
		// form (regarding, related, action); both APIs store the same
		// Events, and core/v1 Events are still served.
		//lint:ignore SA1019 the events.k8s.io recorder is a change of its own (RBAC, call form)
		r.Recorder = mgr.GetEventRecorderFor("peerlink-controller")
	}
	if _, err := r.allocator(nil); err != nil {
		return err
	}
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &netv1beta1.Configuration{}, remoteClusterIDIndex,
		func(o client.Object) []string {
			if id := o.GetLabels()[netv1beta1.RemoteClusterIDLabel]; id != "" {
				return []string{id}
			}
			return nil
		})
	if err != nil {
		return fmt.Errorf("index configurations by remote cluster id: %w", err)
	}
	// Status updates, the controller's own writes, are not worth a
	// reconcile: only spec and label changes are.
	changes := builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))
	return ctrl.NewControllerManagedBy(mgr).
		Named("configuration").
		For(&netv1beta1.Configuration{}, changes).
		Watches(&netv1beta1.Configuration{}, handler.EnqueueRequestsFromMapFunc(r.samePeer), changes).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.holdingReserved), builder.WithPredicates(nodeAddressesChanged())).
		Watches(&netv1beta1.GatewayClient{}, handler.EnqueueRequestsFromMapFunc(r.holdingReserved)).
		Watches(&netv1beta1.GatewayServer{}, handler.EnqueueRequestsFromMapFunc(r.holdingReserved)).
		Complete(r)
}

// samePeer maps a Configuration to the others of the same peer, so that
// when the older one goes away or changes peer, the next one takes over.
func (r *Reconciler) samePeer(ctx context.Context, o client.Object) []reconcile.Request {
	id := o.GetLabels()[netv1beta1.RemoteClusterIDLabel]
	if id == "" {
		return nil
	}
	var list netv1beta1.ConfigurationList
	if err := r.Client.List(ctx, &list, client.MatchingFields{remoteClusterIDIndex: id}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list configurations of the same remote cluster", "remoteClusterID", id)
		return nil
	}
	var reqs []reconcile.Request
	for _, c := range list.Items {
		if c.UID != o.GetUID() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
		}
	}
	return reqs
}
