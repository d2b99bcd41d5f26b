package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/reconciler/apply"
	"github.com/peerlink/peerlink/reconciler/outcome"
	"github.com/peerlink/peerlink/templates"
)

// wgGatewayKind is WgGatewayServer or WgGatewayClient, as the flow the two
// share needs it. A server is a client with a Service in front.
type wgGatewayKind[T client.Object] struct {
	objectKind[T]
	// gatewayResource is the plural of the kind the gateway's agent reads:
	// gatewayservers or gatewayclients.
	gatewayResource string
	// workload returns the Deployment template and the key Secret reference
	// of an object of the kind.
	workload func(T) (netv1beta1.DeploymentTemplate, corev1.LocalObjectReference)
	// service returns the template of the Service exposing a server; nil
	// for the client kind, which nothing reaches from outside.
	service func(T) netv1beta1.ServiceTemplate
}

// wgGatewayServerKind is the WgGatewayServer kind.
func wgGatewayServerKind() wgGatewayKind[*netv1beta1.WgGatewayServer] {
	return wgGatewayKind[*netv1beta1.WgGatewayServer]{
		objectKind: kindOf[netv1beta1.WgGatewayServer, netv1beta1.WgGatewayServerList]("WgGatewayServer", func(wg *netv1beta1.WgGatewayServer) statusFields {
			s := &wg.Status
			return statusFields{all: s, common: &s.CommonStatus, gateway: &s.GatewayStatus, endpoint: &s.Endpoint}
		}),
		gatewayResource: "gatewayservers",
		workload: func(wg *netv1beta1.WgGatewayServer) (netv1beta1.DeploymentTemplate, corev1.LocalObjectReference) {
			return wg.Spec.Deployment, wg.Spec.SecretRef
		},
		service: func(wg *netv1beta1.WgGatewayServer) netv1beta1.ServiceTemplate { return wg.Spec.Service },
	}
}

// wgGatewayClientKind is the WgGatewayClient kind.
func wgGatewayClientKind() wgGatewayKind[*netv1beta1.WgGatewayClient] {
	return wgGatewayKind[*netv1beta1.WgGatewayClient]{
		objectKind: kindOf[netv1beta1.WgGatewayClient, netv1beta1.WgGatewayClientList]("WgGatewayClient", func(wg *netv1beta1.WgGatewayClient) statusFields {
			s := &wg.Status
			return statusFields{all: s, common: &s.CommonStatus, gateway: &s.GatewayStatus}
		}),
		gatewayResource: "gatewayclients",
		workload: func(wg *netv1beta1.WgGatewayClient) (netv1beta1.DeploymentTemplate, corev1.LocalObjectReference) {
			return wg.Spec.Deployment, wg.Spec.SecretRef
		},
	}
}

// wgGatewayReconciler runs the gateway of a WgGatewayServer or
// WgGatewayClient: its ServiceAccount and RBAC, key Secret, Deployment and,
// for a server, Service, all named gw-<name> and owned by the object, and
// reports in its status the key Secret, which pod carries traffic and, for a
// server, where it is reachable.
type wgGatewayReconciler[T client.Object] struct {
	kind wgGatewayKind[T]
	// client reads from the manager's cache and writes to the API server.
	client client.Client
	// apiReader reads Secrets and Nodes, which are watched by metadata only
	// and so are not in the cache.
	apiReader client.Reader
	// facts are what the gateway pods are told of this cluster.
	facts podFacts
	// pods reads gateway pods, from a cache of their own.
	pods client.Reader
}

// Reconcile brings the children of one object in line with its spec and
// records the result in its status.
func (r *wgGatewayReconciler[T]) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.kind.flow().Reconcile(ctx, r.client, req.NamespacedName, r.reconcile)
}

// reconcile applies the children and fills the status fields other than the
// conditions.
func (r *wgGatewayReconciler[T]) reconcile(ctx context.Context, wg T) (outcome.Outcome, error) {
	// status.internalEndpoint is publishActivePod's alone: this reconcile
	// reads the active pod for the endpoint and the condition only.
	pod, err := activeGatewayPod(ctx, r.pods, r.apiReader, wg.GetNamespace(), wg.GetName(), wg.GetUID())
	if err != nil {
		return outcome.Outcome{}, err
	}
	// Before the Deployment changes: a rollout must find the active pod
	// marked to go last.
	if err := keepActiveLast(ctx, r.client, pod); err != nil {
		return outcome.Outcome{}, err
	}
	status := r.kind.status(wg)
	owner := *metav1.NewControllerRef(wg, netv1beta1.GroupVersion.WithKind(r.kind.name))
	deployment, secretRef := r.kind.workload(wg)
	ref, pub, err := applyWorkload(ctx, r.client, r.apiReader, wgGateway{
		obj:             wg,
		owner:           owner,
		gatewayResource: r.kind.gatewayResource,
		facts:           r.facts,
		deployment:      deployment,
		secretRef:       secretRef,
	})
	if err != nil {
		return outcome.Outcome{}, err
	}
	status.gateway.SecretRef, status.gateway.PublicKey = ref, pub[:]

	var svc *corev1.Service
	var keep time.Duration
	if r.kind.service != nil {
		svc = gatewayService(r.kind.service(wg), wg.GetName(), wg.GetNamespace(), childLabels(wg), owner)
		live, err := liveService(ctx, r.apiReader, svc)
		if err != nil {
			return outcome.Outcome{}, err
		}
		keep = keepPreviousPort(svc, live, time.Now())
		if err := apply.Typed(ctx, r.client, r.apiReader, svc); err != nil {
			return outcome.Outcome{}, err
		}
		if err := removeStaleSlices(ctx, r.client, svc); err != nil {
			return outcome.Outcome{}, err
		}
		if err := syncSlicePorts(ctx, r.client, svc); err != nil {
			return outcome.Outcome{}, err
		}
	}

	o, err := r.readiness(ctx, wg.GetName(), svc, pod, status)
	if keep > 0 && o.After == 0 {
		// The previous port goes once its grace is over.
		o.After = keep + time.Second
	}
	return o, err
}

// readiness fills a server's status.endpoint and returns the outcome of
// the gateway name whose children are applied: Ready once its active pod runs and,
// for a server (svc not nil), its endpoint is known.
func (r *wgGatewayReconciler[T]) readiness(ctx context.Context, name string, svc *corev1.Service, pod *corev1.Pod, status statusFields) (outcome.Outcome, error) {
	reachable := ""
	if svc != nil {
		ep, wait, err := r.serverEndpoint(ctx, svc, pod)
		if err != nil {
			return outcome.Outcome{}, err
		}
		*status.endpoint = ep
		if wait != nil {
			return *wait, nil
		}
		reachable = ", reachable at " + describeEndpoint(ep)
	}
	if pod == nil {
		return outcome.Progressing(ReasonWaitingForGatewayPod, "no running pod labelled %s=%s,%s=true",
			netv1beta1.GatewayNameLabel, name, netv1beta1.ActiveGatewayLabel), nil
	}
	return outcome.Ready(fmt.Sprintf("gateway pod %s on node %s%s", pod.Name, pod.Spec.NodeName, reachable)), nil
}

// publishActivePod is the reconcile of the gateway's active pod alone: it
// writes status.internalEndpoint when the status names another pod than
// the active one. It runs apart from the reconcile of the children, in a
// controller of its own: every node's fabric follows that field, and a
// failover to a standby replica must not wait behind a reconcile that
// applies the children (a pod deleted starts one, and the new active pod's
// label arrives while it runs).
func (r *wgGatewayReconciler[T]) publishActivePod(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wg := r.kind.newObject()
	if err := r.client.Get(ctx, req.NamespacedName, wg); err != nil || !wg.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	pod, err := activeGatewayPod(ctx, r.pods, r.apiReader, wg.GetNamespace(), wg.GetName(), wg.GetUID())
	if err != nil {
		return ctrl.Result{}, err
	}
	ie := internalEndpoint(pod)
	if equality.Semantic.DeepEqual(r.kind.status(wg).gateway.InternalEndpoint, ie) {
		return ctrl.Result{}, nil
	}
	before := wg.DeepCopyObject().(T)
	r.kind.status(wg).gateway.InternalEndpoint = ie
	return ctrl.Result{}, outcome.PatchStatus(ctx, r.client, before, wg, func(o T) any { return r.kind.status(o).all })
}

// serverEndpoint returns where a server exposed by svc, whose active pod is
// pod (nil for none), is reachable, or the outcome to report while
// something is awaited (see serviceEndpoint). For a NodePort Service the
// nodes are the active pod's, then those of the gateway's other running
// pods (standby replicas), by name.
func (r *wgGatewayReconciler[T]) serverEndpoint(ctx context.Context, svc *corev1.Service, pod *corev1.Pod) (*netv1beta1.EndpointStatus, *outcome.Outcome, error) {
	var nodes []*corev1.Node
	if pod != nil && svc.Spec.Type == corev1.ServiceTypeNodePort {
		names := []string{pod.Spec.NodeName}
		var others corev1.PodList
		if err := r.pods.List(ctx, &others, client.InNamespace(pod.Namespace),
			client.MatchingLabels{netv1beta1.GatewayNameLabel: pod.Labels[netv1beta1.GatewayNameLabel]}); err != nil {
			return nil, nil, fmt.Errorf("list pods of gateway %s/%s: %w", pod.Namespace, pod.Labels[netv1beta1.GatewayNameLabel], err)
		}
		var rest []string
		for _, p := range others.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" && !slices.Contains(names, p.Spec.NodeName) && !slices.Contains(rest, p.Spec.NodeName) {
				rest = append(rest, p.Spec.NodeName)
			}
		}
		slices.Sort(rest)
		for _, name := range append(names, rest...) {
			node := &corev1.Node{}
			if err := r.apiReader.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
				return nil, nil, fmt.Errorf("get node %s of a pod of gateway %s/%s: %w", name, pod.Namespace, pod.Labels[netv1beta1.GatewayNameLabel], err)
			}
			nodes = append(nodes, node)
		}
	}
	ep, wait := serviceEndpoint(svc, nodes)
	return ep, wait, nil
}

// setupWgGateway registers the reconciler of kind with mgr and returns it,
// and beside it the controller that publishes the active pod
// (publishActivePod), which watches the objects and their pods. The first
// watches the children by metadata only (their content is applied, never
// read from the cache), the key Secrets by metadata only, and the gateway
// pods through a cache of their own; for a server also the Nodes of its
// pods, by metadata only. A Secret event brings back the objects whose key
// Secret it is, so that a deleted generated Secret is made again and a
// fixed user Secret is checked again.
func setupWgGateway[T client.Object](mgr ctrl.Manager, opts Options, kind wgGatewayKind[T]) (*wgGatewayReconciler[T], error) {
	pods, err := newGatewayPodCache(mgr)
	if err != nil {
		return nil, err
	}
	r := &wgGatewayReconciler[T]{kind: kind, client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), pods: pods,
		facts: podFacts{localRanges: opts.LocalRanges, unknownSource: opts.UnknownSource, serviceLimits: opts.ServiceLimits}}
	forSecret := kind.requestsFor(r.client, func(secret client.Object, wg T) bool {
		_, ref := kind.workload(wg)
		return wg.GetNamespace() == secret.GetNamespace() && templates.KeySecretName(wg.GetName(), ref) == secret.GetName()
	})
	b := ctrl.NewControllerManagedBy(mgr).
		For(kind.newObject()).
		Owns(&appsv1.Deployment{}, builder.OnlyMetadata).
		Owns(&corev1.ServiceAccount{}, builder.OnlyMetadata).
		Owns(&rbacv1.Role{}, builder.OnlyMetadata).
		Owns(&rbacv1.RoleBinding{}, builder.OnlyMetadata).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(forSecret), builder.OnlyMetadata).
		WatchesRawSource(source.Kind(pods, &corev1.Pod{}, handler.TypedEnqueueRequestsFromMapFunc(gatewayPodRequest)))
	if kind.service != nil {
		// A NodePort server is reached at the address of its pod's node.
		forNode := kind.requestsFor(r.client, func(node client.Object, wg T) bool {
			ie := kind.status(wg).gateway.InternalEndpoint
			return ie != nil && ie.Node != nil && *ie.Node == node.GetName()
		})
		b = b.Owns(&corev1.Service{}, builder.OnlyMetadata).
			Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(forNode), builder.OnlyMetadata)
	}
	if err := b.Complete(r); err != nil {
		return nil, err
	}
	return r, ctrl.NewControllerManagedBy(mgr).
		Named(strings.ToLower(kind.name) + "-activepod").
		For(kind.newObject()).
		WatchesRawSource(source.Kind(pods, &corev1.Pod{}, handler.TypedEnqueueRequestsFromMapFunc(gatewayPodRequest))).
		Complete(reconcile.Func(r.publishActivePod))
}
