package services

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/peerlink/peerlink/api"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/internal/kube"
	"github.com/peerlink/peerlink/mcs"
	"github.com/peerlink/peerlink/mcs/store"
)

// Labels of what the services reconciler makes.
const (
	// ManagedByLabel and ManagedBy mark the derived Services peerlink
	// owns (a ServiceImport carries only the exported labels).
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "peerlink"
	// parallelWrites is how many imports, or export statuses, are written
	// at once.
	parallelWrites = 32
	// SliceManager is the endpointslice.kubernetes.io/managed-by value of
	// imported EndpointSlices: not the built-in controller's, so that it
	// leaves them alone.
	SliceManager = "mcs-controller.peerlink.io"
	// DerivedServiceAnnotation on a ServiceImport names its derived
	// Service.
	DerivedServiceAnnotation = "multicluster.kubernetes.io/derived-service"
)

// servicesReconciler runs the Multi-Cluster Services API for this
// cluster: it publishes the local exports to every peer's tenant namespace
// (for the gateways to send), sets the ServiceExports' conditions, and
// turns the exports of every cluster (this one's and what the gateways
// received) into ServiceImports, derived Services and EndpointSlices in the
// namespaces that allow imports. Every change brings one reconcile of the
// whole clusterset view, so that nothing is missed between two kinds of
// events; the view is computed from the cache and compared with what the
// cache holds, and only what differs is written: a change costs API calls
// in proportion to what it changes, not to the number of services.
type servicesReconciler struct {
	client client.Client
	// reader reads the imports ConfigMaps from the API server: the cache
	// keeps them without their data (CacheByObject).
	reader   client.Reader
	opts     Options
	recorder record.EventRecorder
	metrics  *servicesMetrics
	now      func() time.Time
	// decoded keeps each peer's received set, decoded once per version of
	// its imports shards.
	decoded map[string]receivedSet
	// exports encodes the local export set, each shard compressed again
	// only when its services change; peers of the same number of shards
	// share the encoding.
	exports mcs.ShardEncoder
	// made is what the last reconcile made of each import, which the
	// next skips while it holds.
	made map[mcs.Key]madeImport
}

// receivedSet is a peer's set as decoded from one version of its imports
// shards: its services, not the ConfigMaps' bytes.
type receivedSet struct {
	// version is the shards' version (store.Stored.Version).
	version string
	// set is as the peer sent it, its endpoints at the peer's own
	// addresses: slices translate them (see endpointView).
	set mcs.Set
	// summary is the gateway's summary of what it rejected, as last
	// reported.
	summary string
	// checked are the ranges the endpoints were last checked against.
	checked string
	// decoder decodes the next version, each shard again only when it
	// changed.
	decoder *mcs.ShardDecoder
}

// servicesMetrics are the services reconciler's Prometheus metrics.
type servicesMetrics struct {
	refused *prometheus.CounterVec
}

// newServicesMetrics registers the metrics with reg, or takes those a
// reconciler registered before (tests start several managers).
func newServicesMetrics(reg prometheus.Registerer) (*servicesMetrics, error) {
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "peerlink_controller_service_imports_refused_total",
		Help: "What the controller refused of the services peers export, by the rule broken: each service refused, or each export set " +
			"refused whole (document-bytes, encoded-bytes, undecodable, or services: more services refused than the limit of services), " +
			"counted once per version of the peer's imports ConfigMap. What a gateway refused on receipt is counted by the gateway.",
	}, []string{"reason"})
	if err := reg.Register(refused); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, err
		}
		existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
		if !ok {
			return nil, err
		}
		refused = existing
	}
	for _, rule := range mcs.Rules() {
		refused.WithLabelValues(rule)
	}
	return &servicesMetrics{refused: refused}, nil
}

// servicesRequest is the one request the reconciler works on.
var servicesRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: "clusterset"}}

// Setup registers the services reconciler with mgr, which must cache the
// ConfigMaps of the exchange as reconciler.CacheByObject says.
func Setup(mgr ctrl.Manager, opts Options) error {
	m, err := newServicesMetrics(ctrlmetrics.Registry)
	if err != nil {
		return fmt.Errorf("register the services metrics: %w", err)
	}
	// The core/v1 recorder, as the configuration reconciler's: see there.
	//lint:ignore SA1019 the events.k8s.io recorder is a change of its own (RBAC, call form)
	recorder := mgr.GetEventRecorderFor("peerlink-controller")
	r := &servicesReconciler{client: mgr.GetClient(), reader: mgr.GetAPIReader(), opts: opts,
		recorder: recorder, metrics: m, now: time.Now, decoded: map[string]receivedSet{}}
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{servicesRequest}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("services").
		Watches(&mcsv1beta1.ServiceExport{}, all).
		Watches(&mcsv1beta1.ServiceImport{}, all).
		Watches(&corev1.Service{}, all).
		Watches(&discoveryv1.EndpointSlice{}, all).
		Watches(&corev1.Namespace{}, all).
		Watches(&corev1.ConfigMap{}, all).
		Watches(&netv1beta1.Configuration{}, all).
		Watches(&netv1beta1.Connection{}, all).
		Complete(r)
}

// peerSide is what the reconciler knows of one peer: its tenant
// namespace, the Configuration that maps its ranges into this cluster's
// view, and whether its tunnel is up.
type peerSide struct {
	id        string
	namespace string
	conf      *netv1beta1.Configuration
	live      bool
}

func (r *servicesReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	exports, local, err := r.localExports(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	peers, err := r.peers(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	marshalled, err := mcs.Marshal(local)
	if err != nil {
		return reconcile.Result{}, err
	}
	var errs []error
	for _, p := range peers {
		if err := r.publish(ctx, p, marshalled); err != nil {
			errs = append(errs, err)
		}
	}
	sources := []mcs.Source{{Cluster: r.opts.ClusterID, Services: local, Live: true, Local: true}}
	views := map[string][]netv1beta1.RemoteRange{}
	for _, p := range peers {
		set, err := r.received(ctx, p)
		if err != nil {
			log.Error(err, "read the services a peer exports", "peer", p.id)
			continue
		}
		sources = append(sources, mcs.Source{Cluster: p.id, Services: set, Live: p.live})
		views[p.id] = translations(p.conf)
	}
	imports := mcs.Merge(sources)
	if err := r.setExportConditions(ctx, exports, imports, len(errs) == 0); err != nil {
		errs = append(errs, err)
	}
	if err := r.applyImports(ctx, imports, views, spreadKeys(exports)); err != nil {
		errs = append(errs, err)
	}
	return reconcile.Result{}, errors.Join(errs...)
}

// exportState is one ServiceExport and what became of it.
type exportState struct {
	export *mcsv1beta1.ServiceExport
	// valid is the Valid condition's status and reason.
	valid  bool
	reason string
	msg    string
}

// localExports reads the ServiceExports and the Services they name into
// this cluster's export set.
func (r *servicesReconciler) localExports(ctx context.Context) ([]exportState, mcs.Set, error) {
	var list mcsv1beta1.ServiceExportList
	if err := r.client.List(ctx, &list); err != nil {
		return nil, nil, fmt.Errorf("list serviceexports: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, mcs.Set{}, nil
	}
	// The endpoints of every Service, read once: one pass over the cache
	// instead of one per export, and only read, so not copied.
	var all discoveryv1.EndpointSliceList
	if err := r.client.List(ctx, &all, client.HasLabels{discoveryv1.LabelServiceName}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("list endpointslices: %w", err)
	}
	slicesOf := map[types.NamespacedName][]*discoveryv1.EndpointSlice{}
	for i := range all.Items {
		sl := &all.Items[i]
		if sl.Labels[discoveryv1.LabelManagedBy] == SliceManager {
			continue // imported, not local
		}
		k := types.NamespacedName{Namespace: sl.Namespace, Name: sl.Labels[discoveryv1.LabelServiceName]}
		slicesOf[k] = append(slicesOf[k], sl)
	}
	set := mcs.Set{}
	var states []exportState
	for i := range list.Items {
		se := &list.Items[i]
		st := exportState{export: se}
		if se.DeletionTimestamp != nil {
			continue
		}
		var svc corev1.Service
		err := r.client.Get(ctx, client.ObjectKeyFromObject(se), &svc)
		switch {
		case apierrors.IsNotFound(err):
			st.reason, st.msg = string(mcsv1beta1.ServiceExportReasonNoService), "service "+se.Namespace+"/"+se.Name+" not found"
		case err != nil:
			return nil, nil, fmt.Errorf("get service %s/%s: %w", se.Namespace, se.Name, err)
		case svc.Spec.Type == corev1.ServiceTypeExternalName:
			st.reason, st.msg = string(mcsv1beta1.ServiceExportReasonInvalidServiceType), "an ExternalName Service cannot be exported"
		default:
			s := exported(se, &svc, slicesOf[client.ObjectKeyFromObject(&svc)])
			set[s.Key] = s
			st.valid, st.reason, st.msg = true, string(mcsv1beta1.ServiceExportReasonValid), "service "+se.Namespace+"/"+se.Name+" is exported"
		}
		states = append(states, st)
	}
	return states, set, nil
}

// exported makes the exported form of a Service and its endpoints, from
// its EndpointSlices.
func exported(se *mcsv1beta1.ServiceExport, svc *corev1.Service, endpoints []*discoveryv1.EndpointSlice) mcs.Service {
	s := mcs.Service{
		Key:                   mcs.Key{Namespace: svc.Namespace, Name: svc.Name},
		Exported:              se.CreationTimestamp.UTC(),
		Type:                  mcsv1beta1.ClusterSetIP,
		SessionAffinity:       svc.Spec.SessionAffinity,
		SessionAffinityConfig: svc.Spec.SessionAffinityConfig,
		InternalTrafficPolicy: svc.Spec.InternalTrafficPolicy,
		TrafficDistribution:   svc.Spec.TrafficDistribution,
		IPFamilies:            svc.Spec.IPFamilies,
		Labels:                se.Spec.ExportedLabels,
		Annotations:           se.Spec.ExportedAnnotations,
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		s.Type = mcsv1beta1.Headless
	}
	s.Normalize()
	for _, p := range svc.Spec.Ports {
		s.Ports = append(s.Ports, mcs.Port{Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol, Port: p.Port})
	}
	// In a stable order, so that an unchanged Service encodes the same.
	endpoints = slices.Clone(endpoints)
	slices.SortFunc(endpoints, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	for _, sl := range endpoints {
		if sl.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		g := mcs.EndpointGroup{}
		for _, p := range sl.Ports {
			if p.Port == nil {
				continue
			}
			port := mcs.Port{Port: *p.Port, Protocol: corev1.ProtocolTCP, AppProtocol: p.AppProtocol}
			if p.Name != nil {
				port.Name = *p.Name
			}
			if p.Protocol != nil {
				port.Protocol = *p.Protocol
			}
			g.Ports = append(g.Ports, port)
		}
		for _, ep := range sl.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			for _, a := range ep.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil {
					continue
				}
				e := mcs.Endpoint{IP: ip, Ready: ready}
				if ep.Hostname != nil {
					e.Hostname = *ep.Hostname
				}
				g.Endpoints = append(g.Endpoints, e)
			}
		}
		if len(g.Endpoints) > 0 {
			s.Endpoints = append(s.Endpoints, g)
		}
	}
	return s
}

// peers lists the peers with a Configuration, each with its tunnel state.
func (r *servicesReconciler) peers(ctx context.Context) ([]peerSide, error) {
	var confs netv1beta1.ConfigurationList
	if err := r.client.List(ctx, &confs, client.HasLabels{netv1beta1.RemoteClusterIDLabel}); err != nil {
		return nil, fmt.Errorf("list configurations: %w", err)
	}
	var out []peerSide
	for i := range confs.Items {
		conf := &confs.Items[i]
		id := conf.Labels[netv1beta1.RemoteClusterIDLabel]
		if conf.DeletionTimestamp != nil || id == "" || id == r.opts.ClusterID {
			continue
		}
		p := peerSide{id: id, namespace: conf.Namespace, conf: conf}
		var conns netv1beta1.ConnectionList
		if err := r.client.List(ctx, &conns, client.InNamespace(conf.Namespace),
			client.MatchingLabels{netv1beta1.RemoteClusterIDLabel: id}); err != nil {
			return nil, fmt.Errorf("list connections of %s: %w", id, err)
		}
		for _, c := range conns.Items {
			if c.Status.Value == netv1beta1.Connected {
				p.live = true
			}
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b peerSide) int { return strings.Compare(a.id, b.id) })
	return out, nil
}

// publish writes the local export set, marshalled, into the peer's tenant
// namespace, where its gateway reads it, in as many shards as it takes
// given those stored there now.
func (r *servicesReconciler) publish(ctx context.Context, p peerSide, local *mcs.Marshalled) error {
	previous, err := store.Count(ctx, r.client, p.namespace, mcs.ExportsConfigMap, mcs.ExportsRole)
	if err != nil {
		return fmt.Errorf("publish the exports to %s: %w", p.id, err)
	}
	shards, _, err := r.exports.Encode(local, local.Count(previous))
	if err != nil {
		return fmt.Errorf("publish the exports to %s: %w", p.id, err)
	}
	t := store.Target{Namespace: p.namespace, Name: mcs.ExportsConfigMap,
		Labels: map[string]string{mcs.ExchangeLabel: mcs.ExportsRole, netv1beta1.RemoteClusterIDLabel: p.id}}
	if err := store.Write(ctx, r.client, t, shards); err != nil {
		return fmt.Errorf("publish the exports to %s: %w", p.id, err)
	}
	return nil
}

// received returns the set the peer's gateway wrote, decoded once per
// version of its imports shards: the cache holds the ConfigMaps without
// their data, and a new version is read from the API server, decoded
// within the limits, and its refusals counted and reported then. A version
// refused whole, or shards not yet a whole set (the gateway is changing
// their number), leave the set decoded before in place. Endpoints outside
// the ranges the peer declared are reported once per version and ranges;
// slices leave them out (endpointView).
func (r *servicesReconciler) received(ctx context.Context, p peerSide) (mcs.Set, error) {
	got := r.decoded[p.id]
	stored, err := store.Read(ctx, r.client, p.namespace, mcs.ImportsConfigMap, mcs.ImportsRole)
	switch {
	case apierrors.IsNotFound(err):
		delete(r.decoded, p.id)
		return mcs.Set{}, nil
	case errors.Is(err, store.ErrIncomplete):
	case err != nil:
		return nil, err
	case got.version != stored.Version:
		if got, err = r.decode(ctx, p, got); err != nil {
			return nil, err
		}
	}
	if ranges := translations(p.conf); got.checked != fmt.Sprint(ranges) {
		r.reportOutside(p, got.set, ranges)
		got.checked = fmt.Sprint(ranges)
	}
	r.decoded[p.id] = got
	if got.set == nil {
		return mcs.Set{}, nil
	}
	return got.set, nil
}

// decode reads the latest version of the peer's imports shards from the
// API server and decodes it, unless it is the version decoded before.
func (r *servicesReconciler) decode(ctx context.Context, p peerSide, before receivedSet) (receivedSet, error) {
	stored, err := store.Read(ctx, r.reader, p.namespace, mcs.ImportsConfigMap, mcs.ImportsRole)
	if apierrors.IsNotFound(err) || errors.Is(err, store.ErrIncomplete) {
		return before, nil
	}
	if err != nil {
		return before, err
	}
	if stored.Version == before.version {
		return before, nil
	}
	got := receivedSet{version: stored.Version, set: before.set, summary: before.summary, decoder: before.decoder}
	if got.decoder == nil {
		got.decoder = &mcs.ShardDecoder{}
	}
	if summary := stored.Annotations[mcs.RejectedSummaryAnnotation]; summary != before.summary {
		got.summary = summary
		r.reportGateway(p, summary)
	}
	set, rejected, err := got.decoder.Decode(stored.Shards, r.opts.Limits.WithDefaults(), r.now())
	if err != nil {
		r.metrics.refused.WithLabelValues(mcs.RuleOf(err)).Inc()
		r.recorder.Eventf(p.conf, corev1.EventTypeWarning, "ImportsRefused",
			"the services %s exports (%d shards of %s/%s) are refused whole, those imported before stand: %v",
			p.id, len(stored.Shards), p.namespace, mcs.ImportsConfigMap, err)
		return got, nil
	}
	for _, rej := range rejected {
		r.metrics.refused.WithLabelValues(rej.Rule).Inc()
	}
	r.reportRejected(p, "", mcs.Summarize(rejected))
	got.set = set
	return got, nil
}

// reportGateway reports, on the peer's Configuration, what its gateway
// rejected of the peer's set, from the summary it wrote on the imports
// ConfigMap.
func (r *servicesReconciler) reportGateway(p peerSide, summary string) {
	if summary == "" {
		return
	}
	var sum mcs.RejectedSummary
	if err := json.Unmarshal([]byte(summary), &sum); err != nil {
		r.recorder.Eventf(p.conf, corev1.EventTypeWarning, "ImportRefused", "the gateway's summary of what it refused of %s's services is not one: %v", p.id, err)
		return
	}
	r.reportRejected(p, " by the gateway", sum)
}

// reportRejected makes one Event per rule broken: how many services, and
// the first few with their reasons.
func (r *servicesReconciler) reportRejected(p peerSide, by string, sum mcs.RejectedSummary) {
	for _, rule := range slices.Sorted(maps.Keys(sum.Rules)) {
		var first []string
		for _, rej := range sum.First {
			if rej.Rule == rule && len(first) < 3 {
				first = append(first, rej.Key.String()+": "+rej.Reason)
			}
		}
		r.recorder.Eventf(p.conf, corev1.EventTypeWarning, "ImportRefused", "%d services %s exports refused%s (%s): %s",
			sum.Rules[rule], p.id, by, rule, strings.Join(first, "; "))
	}
}

// reportOutside reports, in one Event, the services of the set with
// endpoints outside the ranges the peer declared.
func (r *servicesReconciler) reportOutside(p peerSide, set mcs.Set, ranges []netv1beta1.RemoteRange) {
	services, dropped := 0, 0
	var first []string
	for _, s := range set.Sorted() {
		n := 0
		for _, g := range s.Endpoints {
			for _, e := range g.Endpoints {
				if _, ok := translate(ranges, e.IP); !ok {
					n++
				}
			}
		}
		if n == 0 {
			continue
		}
		services, dropped = services+1, dropped+n
		if len(first) < 5 {
			first = append(first, fmt.Sprintf("%s (%d)", s.Key, n))
		}
	}
	if services > 0 {
		r.recorder.Eventf(p.conf, corev1.EventTypeWarning, "EndpointsOutsideRanges",
			"%d endpoints of %d services exported by %s lie outside the ranges %s declared and were dropped: %s",
			dropped, services, p.id, p.id, strings.Join(first, ", "))
	}
}

// endpointView returns how this cluster reaches the endpoints of member
// m: a peer's translated into the range this cluster sees the peer's
// under, and none outside the ranges the peer declared.
func endpointView(m mcs.Member, views map[string][]netv1beta1.RemoteRange) func(netip.Addr) (netip.Addr, bool) {
	if m.Local {
		return func(ip netip.Addr) (netip.Addr, bool) { return ip, true }
	}
	ranges := views[m.Cluster]
	return func(ip netip.Addr) (netip.Addr, bool) { return translate(ranges, ip) }
}

// translations are the peer's declared pod and external ranges that the
// controller has remapped, from a Ready Configuration; none when its status
// does not fit its spec.
func translations(conf *netv1beta1.Configuration) []netv1beta1.RemoteRange {
	ranges, err := conf.RemappedRanges()
	if err != nil {
		return nil
	}
	return ranges
}

func translate(ranges []netv1beta1.RemoteRange, ip netip.Addr) (netip.Addr, bool) {
	for _, m := range ranges {
		if m.Real.Contains(ip) {
			out, err := cidr.Translate(ip, m.Real, m.Remapped)
			return out, err == nil
		}
	}
	return netip.Addr{}, false
}

// setExportConditions writes Valid, Ready and Conflict on every local
// ServiceExport whose conditions change.
func (r *servicesReconciler) setExportConditions(ctx context.Context, states []exportState, imports map[mcs.Key]*mcs.Import, published bool) error {
	var changed []*mcsv1beta1.ServiceExport
	for _, st := range states {
		se := st.export.DeepCopy()
		gen := se.Generation
		set := func(t, reason, msg string, ok bool) {
			status := metav1.ConditionFalse
			if ok {
				status = metav1.ConditionTrue
			}
			meta.SetStatusCondition(&se.Status.Conditions, metav1.Condition{
				Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen,
			})
		}
		set(string(mcsv1beta1.ServiceExportConditionValid), st.reason, st.msg, st.valid)
		switch {
		case !st.valid:
			set(string(mcsv1beta1.ServiceExportConditionReady), string(mcsv1beta1.ServiceExportReasonFailed), st.msg, false)
		case published:
			set(string(mcsv1beta1.ServiceExportConditionReady), string(mcsv1beta1.ServiceExportReasonExported),
				"exported to every peer of this cluster", true)
		default:
			set(string(mcsv1beta1.ServiceExportConditionReady), string(mcsv1beta1.ServiceExportReasonPending),
				"not yet published to every peer", false)
		}
		if imp := imports[mcs.Key{Namespace: se.Namespace, Name: se.Name}]; st.valid && imp != nil && len(imp.Conflicts) > 0 {
			reason, msg := mcs.ConflictReason(imp.Conflicts), conflictMessage(imp)
			set(string(mcsv1beta1.ServiceExportConditionConflict), reason, msg, true)
			// Reported once per change: an Event says it happened.
			if old := meta.FindStatusCondition(st.export.Status.Conditions, string(mcsv1beta1.ServiceExportConditionConflict)); old == nil ||
				old.Status != metav1.ConditionTrue || old.Reason != reason || old.Message != msg {
				r.recorder.Eventf(st.export, corev1.EventTypeWarning, string(mcsv1beta1.ServiceExportConditionConflict), "%s: %s", reason, msg)
			}
		} else {
			set(string(mcsv1beta1.ServiceExportConditionConflict), string(mcsv1beta1.ServiceExportReasonNoConflicts), "no conflict", false)
		}
		if !conditionsEqual(st.export.Status.Conditions, se.Status.Conditions) {
			changed = append(changed, se)
		}
	}
	// A thousand new exports are a thousand status writes: several at
	// once, as the imports are.
	var mu sync.Mutex
	var errs []error
	var g errgroup.Group
	g.SetLimit(parallelWrites)
	for _, se := range changed {
		g.Go(func() error {
			if err := r.client.Status().Update(ctx, se); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				mu.Lock()
				errs = append(errs, fmt.Errorf("update serviceexport %s/%s status: %w", se.Namespace, se.Name, err))
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait() // errors are gathered in errs
	return errors.Join(errs...)
}

// conflictMessage says whose export an import in conflict follows, and
// why: the export this cluster knew first, by its own clock.
func conflictMessage(imp *mcs.Import) string {
	w := imp.Members[0]
	var others []string
	for _, m := range imp.Members[1:] {
		others = append(others, m.Cluster)
	}
	if w.Local {
		return fmt.Sprintf("the exports of %s disagree; this cluster's export is in effect, made before those of %s were first seen here",
			imp.Key, strings.Join(others, ", "))
	}
	return fmt.Sprintf("the exports of %s disagree; the export of cluster %s is in effect, first seen here at %s, before the others",
		imp.Key, w.Cluster, w.Since().UTC().Format(time.RFC3339))
}

// conditionsEqual compares conditions but for their transition times.
func conditionsEqual(a, b []metav1.Condition) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.Condition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message &&
			x.ObservedGeneration == y.ObservedGeneration
	})
}

// importAllowed tells whether ns takes imports: it exists, is not being
// deleted, and is allowed by flag or by label.
func (r *servicesReconciler) importAllowed(ctx context.Context, ns string) (bool, error) {
	var n corev1.Namespace
	if err := r.client.Get(ctx, types.NamespacedName{Name: ns}, &n); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	if n.DeletionTimestamp != nil {
		return false, nil
	}
	return n.Labels[mcs.ImportNamespaceLabel] == "true" || r.opts.importsAllowedIn(ns), nil
}

// madeObjects is what the cache holds of the objects imports are made of,
// by namespace and name: every ServiceImport, and the derived Services and
// EndpointSlices peerlink made.
type madeObjects struct {
	imports map[types.NamespacedName]*mcsv1beta1.ServiceImport
	derived map[types.NamespacedName]*corev1.Service
	slices  map[types.NamespacedName]*discoveryv1.EndpointSlice
}

func (r *servicesReconciler) madeObjects(ctx context.Context) (madeObjects, error) {
	m := madeObjects{
		imports: map[types.NamespacedName]*mcsv1beta1.ServiceImport{},
		derived: map[types.NamespacedName]*corev1.Service{},
		slices:  map[types.NamespacedName]*discoveryv1.EndpointSlice{},
	}
	var sis mcsv1beta1.ServiceImportList
	if err := r.client.List(ctx, &sis); err != nil {
		return m, fmt.Errorf("list serviceimports: %w", err)
	}
	for i := range sis.Items {
		m.imports[client.ObjectKeyFromObject(&sis.Items[i])] = &sis.Items[i]
	}
	var derived corev1.ServiceList
	if err := r.client.List(ctx, &derived, client.MatchingLabels{ManagedByLabel: ManagedBy}, client.HasLabels{mcsv1beta1.LabelServiceName}); err != nil {
		return m, fmt.Errorf("list derived services: %w", err)
	}
	for i := range derived.Items {
		m.derived[client.ObjectKeyFromObject(&derived.Items[i])] = &derived.Items[i]
	}
	// The imported slices are compared and deleted, never changed in
	// place: the cache's own, not copies.
	var sls discoveryv1.EndpointSliceList
	if err := r.client.List(ctx, &sls, client.MatchingLabels{discoveryv1.LabelManagedBy: SliceManager}, client.UnsafeDisableDeepCopy); err != nil {
		return m, fmt.Errorf("list imported endpointslices: %w", err)
	}
	for i := range sls.Items {
		m.slices[client.ObjectKeyFromObject(&sls.Items[i])] = &sls.Items[i]
	}
	return m, nil
}

// spreadKeys are the services whose local ServiceExport turns the
// preference for local endpoints off (mcs.PreferLocalAnnotation "false").
func spreadKeys(exports []exportState) map[mcs.Key]bool {
	out := map[mcs.Key]bool{}
	for _, st := range exports {
		if st.export.Annotations[mcs.PreferLocalAnnotation] == "false" {
			out[mcs.Key{Namespace: st.export.Namespace, Name: st.export.Name}] = true
		}
	}
	return out
}

// applyImports makes the imports in the namespaces that allow them and
// removes every other import peerlink made; spread names the imports that
// do not prefer local endpoints. Only what differs from the cache is
// written.
func (r *servicesReconciler) applyImports(ctx context.Context, imports map[mcs.Key]*mcs.Import, views map[string][]netv1beta1.RemoteRange, spread map[mcs.Key]bool) error {
	have, err := r.madeObjects(ctx)
	if err != nil {
		return err
	}
	var errs []error
	want := map[types.NamespacedName]bool{}
	wantDerived := map[types.NamespacedName]bool{}
	wantSlices := map[types.NamespacedName]bool{}
	allowed := map[string]bool{}
	var apply []*mcs.Import
	for _, k := range slices.SortedFunc(maps.Keys(imports), mcs.Key.Compare) {
		imp := imports[k]
		ok, known := allowed[k.Namespace]
		if !known {
			if ok, err = r.importAllowed(ctx, k.Namespace); err != nil {
				errs = append(errs, err)
				continue
			}
			allowed[k.Namespace] = ok
		}
		if !ok {
			continue
		}
		want[types.NamespacedName{Namespace: k.Namespace, Name: k.Name}] = true
		if imp.Winner.Type == mcsv1beta1.ClusterSetIP {
			wantDerived[types.NamespacedName{Namespace: k.Namespace, Name: k.Name}] = true
		}
		apply = append(apply, imp)
	}
	// The imports are independent of each other: several are written at
	// once (each in its own order: slices, derived Service, IP), so that
	// a thousand new ones take the API server's time, not a thousand
	// round trips in a row.
	viewKeys := make(map[string]string, len(views))
	for cluster, v := range views {
		viewKeys[cluster] = fmt.Sprint(v)
	}
	made := make(map[mcs.Key]madeImport, len(apply))
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(parallelWrites)
	for _, imp := range apply {
		from := inputsOf(imp, viewKeys, !spread[imp.Key])
		// An import made from the same inputs, whose objects are as it
		// left them, is not made again: a change of one service costs
		// the work of that service.
		if m, ok := r.made[imp.Key]; ok && m.holds(from, have) {
			// The writers below run meanwhile: the maps are theirs too.
			mu.Lock()
			made[imp.Key] = m
			for n := range m.slices {
				wantSlices[types.NamespacedName{Namespace: imp.Namespace, Name: n}] = true
			}
			mu.Unlock()
			continue
		}
		g.Go(func() error {
			m, err := r.applyImport(ctx, imp, have, views, !spread[imp.Key])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if m.complete() {
				m.from = from
				made[imp.Key] = m
			}
			for n := range m.slices {
				wantSlices[types.NamespacedName{Namespace: imp.Namespace, Name: n}] = true
			}
			return nil
		})
	}
	_ = g.Wait() // errors are gathered in errs
	r.made = made
	// What is no longer wanted goes: ServiceImports, derived Services
	// (also of an import that became headless), EndpointSlices; several
	// at once, as a peer's set may have made thousands.
	var gone []client.Object
	for key, si := range have.imports {
		if appliedImport(si) && !want[key] {
			gone = append(gone, si)
		}
	}
	for _, svc := range have.derived {
		si := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Labels[mcsv1beta1.LabelServiceName]}
		if !want[si] || svc.Name != DerivedName(mcs.Key{Namespace: si.Namespace, Name: si.Name}) || !wantDerived[si] {
			gone = append(gone, svc)
		}
	}
	for key, sl := range have.slices {
		if !wantSlices[key] {
			gone = append(gone, sl)
		}
	}
	var del errgroup.Group
	del.SetLimit(parallelWrites)
	for _, o := range gone {
		del.Go(func() error {
			if err := r.client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = del.Wait() // errors are gathered in errs
	return errors.Join(errs...)
}

// DerivedName names the derived Service of namespace/name: "derived-" and
// 10 characters of a hash of the two, lowercase.
func DerivedName(k mcs.Key) string {
	sum := sha256.Sum256([]byte(k.Namespace + "/" + k.Name))
	return "derived-" + strings.ToLower(base32.HexEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))[:10]
}

// applyImport applies one EndpointSlice per member and endpoint group of
// imp, for a ClusterSetIP import its derived Service, then its
// ServiceImport, and returns the slices' names. Each is written only when
// the cache holds something else. With preferLocal, a ClusterSetIP import
// whose local member has a ready endpoint marks the peers' endpoints not
// ready (see localPreferred).
//
// The order is the order a caller needs them in, and makes each new import
// cost one write of each object: the name resolves once the import has its
// clusterset IP, and kube-proxy routes that IP once the derived Service
// exists. So the slices come before the derived Service (kube-proxy
// programs the Service with its endpoints in one sync, instead of first
// without any), and the ServiceImport comes last, with the IP the derived
// Service was given: a client that resolves the name finds a Service with
// endpoints behind it. Neither the slices nor the derived Service have an
// owner, as the ServiceImport does not exist yet when they are made:
// applyImports removes them with their import.
func (r *servicesReconciler) applyImport(ctx context.Context, imp *mcs.Import, have madeObjects, views map[string][]netv1beta1.RemoteRange, preferLocal bool) (madeImport, error) {
	key := types.NamespacedName{Namespace: imp.Namespace, Name: imp.Name}
	derived := ""
	if imp.Winner.Type == mcsv1beta1.ClusterSetIP {
		derived = DerivedName(imp.Key)
	}
	local := preferLocal && localPreferred(imp)
	made := madeImport{slices: map[string]string{}}
	for _, m := range imp.Members {
		for gi, g := range m.Service.Endpoints {
			sl := desiredSlice(imp, m, gi, g, derived, endpointView(m, views), local && !m.Local)
			cur := have.slices[client.ObjectKeyFromObject(sl)]
			if cur == nil || !sameSlice(cur, sl) {
				if err := api.Apply(ctx, r.client, sl, client.FieldOwner(api.FieldManager), client.ForceOwnership); err != nil {
					return made, fmt.Errorf("apply endpointslice %s/%s of %s from %s: %w", imp.Namespace, sl.Name, imp.Key, m.Cluster, err)
				}
				cur = sl
			}
			made.slices[sl.Name] = cur.ResourceVersion
		}
	}
	current := have.imports[key]
	si := desiredImport(imp, derived)
	var unsupported error
	if derived != "" {
		svc := desiredDerived(imp, derived)
		cur := have.derived[client.ObjectKeyFromObject(svc)]
		if cur == nil || !sameDerived(cur, svc) {
			err := api.Apply(ctx, r.client, svc, client.FieldOwner(api.FieldManager), client.ForceOwnership)
			switch {
			case familyNotConfigured(err):
				// An export of a family this cluster has no Services
				// of: the import stands without a clusterset IP, and
				// says why.
				unsupported, cur = err, nil
			case err != nil:
				return made, fmt.Errorf("apply derived service %s/%s of %s: %w", imp.Namespace, derived, imp.Key, err)
			default:
				cur = svc
			}
		}
		// The families follow the clusterset IPs the Service was given.
		if cur != nil {
			si.Spec.IPs, si.Spec.IPFamilies = cur.Spec.ClusterIPs, cur.Spec.IPFamilies
			made.derived = cur.ResourceVersion
		}
	}
	if current == nil || !sameImport(current, si) {
		if err := api.Apply(ctx, r.client, si, client.FieldOwner(api.FieldManager), client.ForceOwnership); err != nil {
			return made, fmt.Errorf("apply serviceimport %s: %w", imp.Key, err)
		}
		current = si
	}
	var err error
	made.serviceImport, err = r.importStatus(ctx, imp, current, unsupported)
	if unsupported != nil {
		// Not kept: the import is made again until the family is there.
		made.serviceImport = ""
	}
	return made, err
}

// madeImport is what applyImport made of an import, and from what: the
// resourceVersion of each object as it left it.
type madeImport struct {
	from          importInputs
	serviceImport string
	derived       string
	// slices are the EndpointSlices' by name.
	slices map[string]string
}

// complete tells whether every object's version is known, so that the
// import can be skipped while they hold.
func (m madeImport) complete() bool {
	for _, v := range m.slices {
		if v == "" {
			return false
		}
	}
	return m.serviceImport != ""
}

// holds tells whether the import, made from the inputs from, is as m left
// it in the cache: its ServiceImport, derived Service and EndpointSlices at
// the versions it wrote or found.
func (m madeImport) holds(from importInputs, have madeObjects) bool {
	imp := from.imp
	if !m.from.equal(from) {
		return false
	}
	key := types.NamespacedName{Namespace: imp.Namespace, Name: imp.Name}
	if si := have.imports[key]; si == nil || si.ResourceVersion != m.serviceImport {
		return false
	}
	if imp.Winner.Type == mcsv1beta1.ClusterSetIP {
		d := have.derived[types.NamespacedName{Namespace: imp.Namespace, Name: DerivedName(imp.Key)}]
		if d == nil || d.ResourceVersion != m.derived {
			return false
		}
	}
	for name, version := range m.slices {
		if sl := have.slices[types.NamespacedName{Namespace: imp.Namespace, Name: name}]; sl == nil || sl.ResourceVersion != version {
			return false
		}
	}
	return true
}

// importInputs are what an import is made from: the merged exports, the
// views of the ranges of its members' clusters, and the preference for
// local endpoints.
type importInputs struct {
	imp         *mcs.Import
	views       string
	preferLocal bool
}

// inputsOf returns the inputs of imp; viewKeys are the views of every
// cluster, written out.
func inputsOf(imp *mcs.Import, viewKeys map[string]string, preferLocal bool) importInputs {
	var views strings.Builder
	for _, m := range imp.Members {
		views.WriteString(m.Cluster + "=" + viewKeys[m.Cluster] + ";")
	}
	return importInputs{imp: imp, views: views.String(), preferLocal: preferLocal}
}

func (in importInputs) equal(o importInputs) bool {
	return in.imp != nil && o.imp != nil && in.views == o.views && in.preferLocal == o.preferLocal && in.imp.Equal(o.imp)
}

// familyNotConfigured tells whether err is the API server's refusal of a
// Service of an IP family the cluster is not configured for.
func familyNotConfigured(err error) bool {
	return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "not configured on this cluster")
}

// appliedImport reports whether this controller applied ServiceImport si
// (its field manager applied fields of it): a ServiceImport carries only
// the exported labels and annotations, so no label of peerlink's can say
// it. One made by someone else is never deleted.
func appliedImport(si *mcsv1beta1.ServiceImport) bool {
	for _, mf := range si.ManagedFields {
		if mf.Manager == api.FieldManager && mf.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

// desiredImport is the ServiceImport of imp, without its IPs.
func desiredImport(imp *mcs.Import, derived string) *mcsv1beta1.ServiceImport {
	w := imp.Winner
	si := &mcsv1beta1.ServiceImport{
		TypeMeta: metav1.TypeMeta{APIVersion: mcsv1beta1.GroupVersion.String(), Kind: "ServiceImport"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: imp.Namespace, Name: imp.Name,
			Labels:      w.Labels,
			Annotations: w.Annotations,
		},
		Spec: mcsv1beta1.ServiceImportSpec{
			Type:                  w.Type,
			Ports:                 []mcsv1beta1.ServicePort{},
			SessionAffinity:       w.SessionAffinity,
			SessionAffinityConfig: w.SessionAffinityConfig,
			InternalTrafficPolicy: w.InternalTrafficPolicy,
			TrafficDistribution:   w.TrafficDistribution,
			IPFamilies:            w.IPFamilies,
		},
	}
	for _, p := range imp.Ports {
		si.Spec.Ports = append(si.Spec.Ports, mcsv1beta1.ServicePort{Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol, Port: p.Port})
	}
	if derived != "" {
		si.Annotations = labels.Merge(si.Annotations, map[string]string{DerivedServiceAnnotation: derived})
	}
	return si
}

// sameImport tells whether the ServiceImport the cache holds already is
// the one desired: metadata peerlink sets, and spec.
func sameImport(have, want *mcsv1beta1.ServiceImport) bool {
	return maps.Equal(have.Labels, want.Labels) && maps.Equal(have.Annotations, want.Annotations) &&
		equality.Semantic.DeepEqual(have.Spec, want.Spec)
}

// importStatus writes the import's status when it changes: the exporting
// clusters and Ready, which is False with IPFamilyNotSupported when
// unsupported says why the import has no clusterset IP.
func (r *servicesReconciler) importStatus(ctx context.Context, imp *mcs.Import, current *mcsv1beta1.ServiceImport, unsupported error) (string, error) {
	si := current.DeepCopy()
	si.Status.Clusters = nil
	for _, m := range imp.Members {
		si.Status.Clusters = append(si.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: m.Cluster})
	}
	slices.SortFunc(si.Status.Clusters, func(a, b mcsv1beta1.ClusterStatus) int { return strings.Compare(a.Cluster, b.Cluster) })
	si.Status.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsPresent
	ready := metav1.Condition{
		Type: string(mcsv1beta1.ServiceImportConditionReady), Status: metav1.ConditionTrue,
		Reason: string(mcsv1beta1.ServiceImportReasonReady), Message: fmt.Sprintf("exported by %d clusters", len(imp.Members)),
		LastTransitionTime: metav1.NewTime(time.Now()),
	}
	if unsupported != nil {
		ready.Status, ready.Reason = metav1.ConditionFalse, string(mcsv1beta1.ServiceImportReasonIPFamilyNotSupported)
		ready.Message = fmt.Sprintf("exported as %v, which this cluster has no Services of: %v", imp.Winner.IPFamilies, unsupported)
	}
	meta.SetStatusCondition(&si.Status.Conditions, ready)
	if slices.Equal(current.Status.Clusters, si.Status.Clusters) && conditionsEqual(current.Status.Conditions, si.Status.Conditions) &&
		current.Status.EndpointSliceObjects == si.Status.EndpointSliceObjects {
		return current.ResourceVersion, nil
	}
	si.ManagedFields = nil
	switch err := r.client.Status().Update(ctx, si); {
	case apierrors.IsConflict(err):
		// The next reconcile writes it again.
		return "", nil
	case err != nil:
		return "", fmt.Errorf("update serviceimport %s status: %w", imp.Key, err)
	}
	return si.ResourceVersion, nil
}

// desiredDerived is the selector-less ClusterIP Service that kube-proxy
// routes the import's clusterset IP through. It has no owner (it is made
// before its ServiceImport): applyImports removes it with the import.
//
// A single-stack export asks for its own family, which the API server
// refuses where this cluster lacks it (the import then says so). A
// dual-stack one prefers both families and names none: the API server
// gives it those this cluster has, in this cluster's order (asking for a
// family the cluster lacks is refused even then).
func desiredDerived(imp *mcs.Import, name string) *corev1.Service {
	policy := corev1.IPFamilyPolicySingleStack
	families := imp.Winner.IPFamilies
	if len(families) > 1 {
		policy, families = corev1.IPFamilyPolicyPreferDualStack, nil
	}
	svc := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: imp.Namespace, Name: name,
			Labels: map[string]string{ManagedByLabel: ManagedBy, mcsv1beta1.LabelServiceName: imp.Name},
		},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeClusterIP,
			SessionAffinity:       imp.Winner.SessionAffinity,
			SessionAffinityConfig: imp.Winner.SessionAffinityConfig,
			InternalTrafficPolicy: imp.Winner.InternalTrafficPolicy,
			TrafficDistribution:   imp.Winner.TrafficDistribution,
			IPFamilyPolicy:        &policy,
			IPFamilies:            families,
		},
	}
	for _, p := range imp.Ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol, Port: p.Port})
	}
	return svc
}

// sameDerived tells whether the derived Service the cache holds already
// has what peerlink sets, the API server's defaults aside.
func sameDerived(have, want *corev1.Service) bool {
	wantAffinity := want.Spec.SessionAffinityConfig
	if wantAffinity == nil && want.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		timeout := corev1.DefaultClientIPServiceAffinitySeconds
		wantAffinity = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeout}}
	}
	port := func(p corev1.ServicePort) string {
		app := ""
		if p.AppProtocol != nil {
			app = *p.AppProtocol
		}
		return fmt.Sprintf("%s/%s/%d/%s", p.Name, p.Protocol, p.Port, app)
	}
	// The API server fills in the families a dual-stack Service gets.
	sameFamilies := equality.Semantic.DeepEqual(have.Spec.IPFamilyPolicy, want.Spec.IPFamilyPolicy) &&
		(len(want.Spec.IPFamilies) == 0 || slices.Equal(have.Spec.IPFamilies, want.Spec.IPFamilies))
	return kube.HasAll(have.Labels, want.Labels) && have.Spec.Type == want.Spec.Type && sameFamilies &&
		have.Spec.SessionAffinity == want.Spec.SessionAffinity &&
		equality.Semantic.DeepEqual(have.Spec.SessionAffinityConfig, wantAffinity) &&
		equality.Semantic.DeepEqual(have.Spec.InternalTrafficPolicy, want.Spec.InternalTrafficPolicy) &&
		equality.Semantic.DeepEqual(have.Spec.TrafficDistribution, want.Spec.TrafficDistribution) &&
		slices.Equal(mapSlice(have.Spec.Ports, port), mapSlice(want.Spec.Ports, port))
}

// localPreferred tells whether the calls of a ClusterSetIP import stay in
// this cluster: its local member has a ready endpoint on a port the import
// routes to it. A headless import is never narrowed: its DNS names every
// cluster's pods, which is what a StatefulSet spread over clusters needs.
func localPreferred(imp *mcs.Import) bool {
	if imp.Winner.Type != mcsv1beta1.ClusterSetIP {
		return false
	}
	for _, m := range imp.Members {
		if !m.Local {
			continue
		}
		for _, g := range m.Service.Endpoints {
			if len(imp.RoutedPorts(m, g)) == 0 {
				continue
			}
			for _, e := range g.Endpoints {
				if e.Ready {
					return true
				}
			}
		}
	}
	return false
}

// desiredSlice is the EndpointSlice of one member's endpoint group, with
// the ports the import routes to that member (see mcs.Import.RoutedPorts)
// and its endpoints as view says this cluster reaches them; standby marks
// them all not ready (ready endpoints of this cluster take the calls).
//
// A group comes from one EndpointSlice of its cluster, so its endpoints are
// of one family: that of its first endpoint, which the slice's address type
// follows (endpoints of the other family are dropped). An IPv6 slice has a
// name of its own, as a slice's address type cannot change.
func desiredSlice(imp *mcs.Import, m mcs.Member, group int, g mcs.EndpointGroup, derived string,
	view func(netip.Addr) (netip.Addr, bool), standby bool) *discoveryv1.EndpointSlice {
	base := derived
	if base == "" {
		base = DerivedName(imp.Key)
	}
	sum := sha256.Sum256([]byte(m.Cluster))
	name := fmt.Sprintf("%s-%s-%d", base, strings.ToLower(base32.HexEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))[:8], group)
	ipv6 := len(g.Endpoints) > 0 && !g.Endpoints[0].IP.Unmap().Is4()
	addressType := discoveryv1.AddressTypeIPv4
	if ipv6 {
		addressType = discoveryv1.AddressTypeIPv6
		name += "-v6"
	}
	lbl := map[string]string{
		mcsv1beta1.LabelServiceName:   imp.Name,
		mcsv1beta1.LabelSourceCluster: m.Cluster,
		discoveryv1.LabelManagedBy:    SliceManager,
	}
	if derived != "" {
		lbl[discoveryv1.LabelServiceName] = derived
	}
	sl := &discoveryv1.EndpointSlice{
		TypeMeta:    metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta:  metav1.ObjectMeta{Namespace: imp.Namespace, Name: name, Labels: lbl},
		AddressType: addressType,
		Endpoints:   []discoveryv1.Endpoint{},
	}
	for _, p := range imp.RoutedPorts(m, g) {
		sl.Ports = append(sl.Ports, discoveryv1.EndpointPort{Name: &p.Name, Protocol: &p.Protocol, Port: &p.Port, AppProtocol: p.AppProtocol})
	}
	for _, e := range g.Endpoints {
		ip, ok := view(e.IP)
		if !ok || ip.Unmap().Is4() == ipv6 {
			continue
		}
		ready := e.Ready && m.Live && !standby
		ep := discoveryv1.Endpoint{Addresses: []string{ip.String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
		if e.Hostname != "" {
			ep.Hostname = &e.Hostname
		}
		sl.Endpoints = append(sl.Endpoints, ep)
	}
	return sl
}

// sameSlice tells whether the EndpointSlice the cache holds already has
// what peerlink sets.
func sameSlice(have, want *discoveryv1.EndpointSlice) bool {
	return kube.HasAll(have.Labels, want.Labels) && have.AddressType == want.AddressType &&
		len(have.OwnerReferences) == 0 &&
		equality.Semantic.DeepEqual(have.Ports, want.Ports) &&
		equality.Semantic.DeepEqual(have.Endpoints, want.Endpoints)
}

func mapSlice[T, U any](in []T, f func(T) U) []U {
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}
