package gateway

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/reconciler/outcome"
	"github.com/peerlink/peerlink/templates"
)

// ReasonDuplicateGateway: an older gateway already connects the peer.
const ReasonDuplicateGateway = "DuplicateGateway"

// gatewayKind is GatewayServer or GatewayClient, as the flow the two share
// needs it: the template a gateway of the kind references, how it renders,
// and what else the gateway waits for.
type gatewayKind[T client.Object] struct {
	objectKind[T]
	// server tells the server kind, whose template renders a
	// WgGatewayServer, from the client kind.
	server bool
	// owned is an object of the kind the default template renders.
	owned client.Object
	// templateField is the path of the template reference, for messages.
	templateField string
	// templateRef returns the template a gateway references, its defaults
	// resolved against the install namespace installNS.
	templateRef func(gw T, installNS string) corev1.ObjectReference
	// render renders template tmpl for a gateway to peer clusterID.
	render func(gw T, tmpl *unstructured.Unstructured, clusterID string) (*unstructured.Unstructured, error)
	// rotation returns the key rotation a gateway asks for.
	rotation func(gw T) keyRotation
	// awaits returns what a gateway whose rendered object is not stalled
	// waits for besides that object, nil for nothing; nil for a kind that
	// waits for nothing else.
	awaits func(gw T) *outcome.Outcome
}

// gatewayServerKind is the GatewayServer kind.
func gatewayServerKind() gatewayKind[*netv1beta1.GatewayServer] {
	return gatewayKind[*netv1beta1.GatewayServer]{
		objectKind: kindOf[netv1beta1.GatewayServer, netv1beta1.GatewayServerList]("GatewayServer", func(gw *netv1beta1.GatewayServer) statusFields {
			s := &gw.Status
			return statusFields{all: s, common: &s.CommonStatus, rendered: &s.ServerRef, endpoint: &s.Endpoint, gateway: &s.GatewayStatus,
				rotation: &s.KeyRotation}
		}),
		server: true, owned: &netv1beta1.WgGatewayServer{}, templateField: "spec.serverTemplateRef",
		rotation: func(gw *netv1beta1.GatewayServer) keyRotation {
			return keyRotation{requested: gw.Spec.KeyRotation, generated: gw.Spec.SecretRef.Name == ""}
		},
		templateRef: func(gw *netv1beta1.GatewayServer, installNS string) corev1.ObjectReference {
			return templates.ServerTemplateRef(&gw.Spec, installNS)
		},
		render: func(gw *netv1beta1.GatewayServer, tmpl *unstructured.Unstructured, id string) (*unstructured.Unstructured, error) {
			data := templates.DataForServer(gw, string(gw.UID), id, templates.KeySecretName(gw.Name, gw.Spec.SecretRef))
			return templates.RenderServer(tmpl, gw, data)
		},
	}
}

// gatewayClientKind is the GatewayClient kind. Its gateway is rendered, and
// its keys made, before the server's endpoint is known: an admin can then
// send the public key to the peer in the first message, and the peer
// answers with the endpoint.
func gatewayClientKind() gatewayKind[*netv1beta1.GatewayClient] {
	return gatewayKind[*netv1beta1.GatewayClient]{
		objectKind: kindOf[netv1beta1.GatewayClient, netv1beta1.GatewayClientList]("GatewayClient", func(gw *netv1beta1.GatewayClient) statusFields {
			s := &gw.Status
			return statusFields{all: s, common: &s.CommonStatus, rendered: &s.ClientRef, gateway: &s.GatewayStatus, rotation: &s.KeyRotation}
		}),
		owned: &netv1beta1.WgGatewayClient{}, templateField: "spec.clientTemplateRef",
		rotation: func(gw *netv1beta1.GatewayClient) keyRotation {
			return keyRotation{requested: gw.Spec.KeyRotation, generated: gw.Spec.SecretRef.Name == ""}
		},
		templateRef: func(gw *netv1beta1.GatewayClient, installNS string) corev1.ObjectReference {
			return templates.ClientTemplateRef(&gw.Spec, installNS)
		},
		render: func(gw *netv1beta1.GatewayClient, tmpl *unstructured.Unstructured, id string) (*unstructured.Unstructured, error) {
			data := templates.DataForClient(gw, string(gw.UID), id, templates.KeySecretName(gw.Name, gw.Spec.SecretRef))
			return templates.Render(tmpl, data)
		},
		awaits: func(gw *netv1beta1.GatewayClient) *outcome.Outcome {
			if ep := gw.Spec.Endpoint.Resolved(); len(ep.Addresses) > 0 && ep.Port != 0 {
				return nil
			}
			o := outcome.Progressing(netv1beta1.ReasonWaitingForEndpoint,
				"spec.endpoint.addresses and spec.endpoint.port: the address and port of the peer's gateway server are not known yet")
			return &o
		},
	}
}

// gatewayReconciler renders the template a GatewayServer or GatewayClient
// references into the object running its gateway (a WgGatewayServer or
// WgGatewayClient with the default templates), owned by the gateway, and
// reports in the gateway's status what that object reports: its key Secret,
// its active pod and, for a server, where it is reachable.
type gatewayReconciler[T client.Object] struct {
	kind gatewayKind[T]
	// client reads from the manager's cache and writes to the API server.
	client client.Client
	// apiReader reads the metadata of an object before it is applied, to
	// make sure it is not someone else's.
	apiReader client.Reader
	// opts are what the reconciler knows of this cluster: its ID, which no
	// gateway may name as its peer, and its namespace, which holds the
	// default templates.
	opts Options
	// promoteDelay is how long a gateway runs on its next key pair before
	// the pair replaces the old one (keyPromoteDelay).
	promoteDelay time.Duration
	// rotationPatience is how long a rotation may wait for the tunnel to
	// run on the next pair before it reports why it cannot
	// (keyRotationPatience).
	rotationPatience time.Duration
}

// Reconcile renders and applies the gateway of one object and records the
// result in its status.
func (r *gatewayReconciler[T]) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.kind.flow().Reconcile(ctx, r.client, req.NamespacedName, r.reconcile)
}

// reconcile checks the gateway's peer, renders its template, applies the
// result in place of a former rendered object and copies its status. A
// gateway that cannot tell its peer, or whose peer has an older gateway
// already, must not run a tunnel: what it rendered is deleted, and what
// that reported is taken out of its status.
func (r *gatewayReconciler[T]) reconcile(ctx context.Context, gw T) (outcome.Outcome, error) {
	status := r.kind.status(gw)
	id, err := outcome.RemoteClusterID(gw, r.opts.ClusterID)
	if err == nil {
		err = checkUniqueGateway(ctx, r.client, peerGateway{r.kind.name, gw}, id)
	}
	if err != nil {
		if derr := deleteRendered(ctx, r.client, *status.rendered, gw); derr != nil {
			return outcome.Outcome{}, derr
		}
		*status.rendered = nil
		status.report(netv1beta1.WgGatewayServerStatus{})
		return outcome.Outcome{}, err
	}
	obj, err := r.render(ctx, gw, id)
	if err != nil {
		return outcome.Outcome{}, err
	}
	if !isObject(*status.rendered, obj) {
		if err := deleteRendered(ctx, r.client, *status.rendered, gw); err != nil {
			return outcome.Outcome{}, err
		}
	}
	*status.rendered = objectRef(obj)
	s, err := renderedStatus(obj)
	if err != nil {
		return outcome.Outcome{}, err
	}
	status.report(s)
	o := renderedOutcome(obj, s)
	if o.State != outcome.StateStalled {
		after, err := r.rotateKeys(ctx, gw, r.kind.rotation(gw), status.gateway, status.rotation, &status.common.Conditions)
		if err != nil {
			return outcome.Outcome{}, err
		}
		o.After = after
	}
	if r.kind.awaits != nil && o.State != outcome.StateStalled {
		if w := r.kind.awaits(gw); w != nil {
			w.After = o.After
			return *w, nil
		}
	}
	return o, nil
}

// render renders the template gw references for peer id and applies the
// result, owned by gw, which it returns as the API server answered.
func (r *gatewayReconciler[T]) render(ctx context.Context, gw T, id string) (*unstructured.Unstructured, error) {
	k := r.kind
	ref, substituted, err := substituteTemplate(ctx, r.apiReader, k.templateRef(gw, r.opts.Namespace), k.templateField, k.server, r.opts.Namespace, gw.GetNamespace())
	if err != nil {
		return nil, err
	}
	conds := &k.status(gw).common.Conditions
	if substituted == "" {
		meta.RemoveStatusCondition(conds, netv1beta1.ConditionTemplateSubstituted)
	} else {
		meta.SetStatusCondition(conds, metav1.Condition{Type: netv1beta1.ConditionTemplateSubstituted, Status: metav1.ConditionTrue,
			Reason: netv1beta1.ReasonNamespaceNotFound, Message: substituted, ObservedGeneration: gw.GetGeneration()})
	}
	tmpl, err := fetchTemplate(ctx, r.client, ref, k.templateField, r.opts.Namespace, gw.GetNamespace())
	if err != nil {
		return nil, err
	}
	obj, err := k.render(gw, tmpl, id)
	if err != nil {
		return nil, outcome.Stall(ReasonInvalidTemplate, "%s: %v", k.templateField, err)
	}
	if err := checkRendered(obj, k.templateField, templates.RenderedKind(k.server), r.opts.AllowedTemplateKinds); err != nil {
		return nil, err
	}
	owner := *metav1.NewControllerRef(gw, netv1beta1.GroupVersion.WithKind(k.name))
	return obj, applyRendered(ctx, r.client, r.apiReader, obj, owner, id)
}

// setupGateway registers the reconciler of kind with mgr and returns it.
// Besides the gateways and the objects rendered for them, it watches the
// template kinds, to render again when a template changes, and the
// gateways of both kinds, so that when one of two gateways for a peer goes
// the other takes over.
func setupGateway[T client.Object](mgr ctrl.Manager, opts Options, kind gatewayKind[T]) (*gatewayReconciler[T], error) {
	r := &gatewayReconciler[T]{kind: kind, client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), opts: opts,
		promoteDelay: keyPromoteDelay, rotationPatience: keyRotationPatience}
	forTemplate := func(templateKind string) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(kind.requestsFor(r.client, func(tmpl client.Object, gw T) bool {
			ref := kind.templateRef(gw, opts.Namespace)
			// An installed default may stand in for a default named in a
			// missing namespace (substituteTemplate).
			sameNamespace := ref.Namespace == tmpl.GetNamespace() ||
				(tmpl.GetNamespace() == opts.Namespace && templates.IsDefaultTemplate(ref, kind.server))
			return ref.APIVersion == netv1beta1.GroupVersion.String() && ref.Kind == templateKind &&
				sameNamespace && ref.Name == tmpl.GetName()
		}))
	}
	samePeer := handler.EnqueueRequestsFromMapFunc(kind.requestsFor(r.client, func(other client.Object, gw T) bool {
		id := other.GetLabels()[netv1beta1.RemoteClusterIDLabel]
		return id != "" && gw.GetLabels()[netv1beta1.RemoteClusterIDLabel] == id
	}))
	return r, ctrl.NewControllerManagedBy(mgr).
		For(kind.newObject()).
		Owns(kind.owned).
		Watches(&netv1beta1.WgGatewayServerTemplate{}, forTemplate(templates.ServerTemplateKind)).
		Watches(&netv1beta1.WgGatewayClientTemplate{}, forTemplate(templates.ClientTemplateKind)).
		Watches(&netv1beta1.GatewayServer{}, samePeer).
		Watches(&netv1beta1.GatewayClient{}, samePeer).
		// A Connection says which key the tunnel runs on (key rotation).
		Watches(&netv1beta1.Connection{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			c, ok := o.(*netv1beta1.Connection)
			if !ok || c.Spec.GatewayRef.Kind != kind.name {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Spec.GatewayRef.Name}}}
		})).
		Complete(r)
}

// peerGateway is a GatewayServer or GatewayClient seen by its kind and
// metadata, to compare gateways of both kinds.
type peerGateway struct {
	kind string
	meta metav1.Object
}

// checkUniqueGateway stalls gw when an older gateway, server or client, in
// any namespace, connects the same peer: two tunnels to one peer would
// fight over its routes. The oldest (by creation time, then kind, namespace
// and name) keeps the peer.
func checkUniqueGateway(ctx context.Context, c client.Reader, gw peerGateway, id string) error {
	others, err := appendPeerGateways(ctx, c, gatewayServerKind().objectKind, id, nil)
	if err == nil {
		others, err = appendPeerGateways(ctx, c, gatewayClientKind().objectKind, id, others)
	}
	if err != nil {
		return err
	}
	for _, o := range others {
		if o.meta.GetUID() != gw.meta.GetUID() && o.meta.GetDeletionTimestamp() == nil && compareGateways(o, gw) < 0 {
			return outcome.Stall(ReasonDuplicateGateway, "%s %s/%s already connects remote cluster %s: delete one of the two",
				o.kind, o.meta.GetNamespace(), o.meta.GetName(), id)
		}
	}
	return nil
}

// appendPeerGateways appends to gws the gateways of kind that connect peer id.
func appendPeerGateways[T client.Object](ctx context.Context, c client.Reader, kind objectKind[T], id string, gws []peerGateway) ([]peerGateway, error) {
	objs, err := kind.list(ctx, c, client.MatchingLabels{netv1beta1.RemoteClusterIDLabel: id})
	if err != nil {
		return nil, fmt.Errorf("gateways of remote cluster %s: %w", id, err)
	}
	for _, o := range objs {
		gws = append(gws, peerGateway{kind.name, o})
	}
	return gws, nil
}

// compareGateways orders gateways by creation time, kind, namespace, name.
func compareGateways(a, b peerGateway) int {
	return cmp.Or(
		a.meta.GetCreationTimestamp().Compare(b.meta.GetCreationTimestamp().Time),
		strings.Compare(a.kind, b.kind),
		strings.Compare(a.meta.GetNamespace(), b.meta.GetNamespace()),
		strings.Compare(a.meta.GetName(), b.meta.GetName()))
}
