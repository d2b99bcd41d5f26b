package reconciler

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/templates"
)

// Reasons of the conditions of a GatewayServer or GatewayClient.
const (
	// ReasonDuplicateGateway: an older gateway already connects the peer.
	ReasonDuplicateGateway = "DuplicateGateway"
	// ReasonTemplateNotFound: the referenced template does not exist.
	ReasonTemplateNotFound = "TemplateNotFound"
	// ReasonInvalidTemplate: the template does not render.
	ReasonInvalidTemplate = "InvalidTemplate"
	// ReasonTemplateNotAllowed: the template lives in a namespace templates
	// may not come from, or renders a kind the controller does not create
	// from templates.
	ReasonTemplateNotAllowed = "TemplateNotAllowed"
	// ReasonWaitingForStatus: the rendered object has not reported on its
	// current generation yet.
	ReasonWaitingForStatus = "WaitingForStatus"
)

// gatewayRemoteClusterID returns the peer a gateway connects to, from its
// mandatory remote-cluster-id label, which must not name this cluster.
func gatewayRemoteClusterID(gw metav1.Object, ownClusterID string) (string, error) {
	id := gw.GetLabels()[netv1beta1.RemoteClusterIDLabel]
	switch {
	case id == "":
		return "", stall(ReasonMissingRemoteClusterID,
			"metadata.labels[%s] is missing: set it to the ID of the peer cluster", netv1beta1.RemoteClusterIDLabel)
	case id == ownClusterID:
		return "", stall(ReasonOwnClusterID,
			"metadata.labels[%s] is %q, the ID of this cluster: set it to the ID of the peer cluster",
			netv1beta1.RemoteClusterIDLabel, id)
	}
	return id, nil
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
	others, err := peerGateways(ctx, c, id)
	if err != nil {
		return err
	}
	for _, o := range others {
		if o.meta.GetUID() != gw.meta.GetUID() && o.meta.GetDeletionTimestamp() == nil && compareGateways(o, gw) < 0 {
			return stall(ReasonDuplicateGateway, "%s %s/%s already connects remote cluster %s: delete one of the two",
				o.kind, o.meta.GetNamespace(), o.meta.GetName(), id)
		}
	}
	return nil
}

// peerGateways lists the GatewayServers and GatewayClients of peer id.
func peerGateways(ctx context.Context, c client.Reader, id string) ([]peerGateway, error) {
	sameID := client.MatchingLabels{netv1beta1.RemoteClusterIDLabel: id}
	var servers netv1beta1.GatewayServerList
	if err := c.List(ctx, &servers, sameID); err != nil {
		return nil, fmt.Errorf("list gatewayservers of remote cluster %s: %w", id, err)
	}
	var clients netv1beta1.GatewayClientList
	if err := c.List(ctx, &clients, sameID); err != nil {
		return nil, fmt.Errorf("list gatewayclients of remote cluster %s: %w", id, err)
	}
	var out []peerGateway
	for i := range servers.Items {
		out = append(out, peerGateway{"GatewayServer", &servers.Items[i]})
	}
	for i := range clients.Items {
		out = append(out, peerGateway{"GatewayClient", &clients.Items[i]})
	}
	return out, nil
}

// compareGateways orders gateways by creation time, kind, namespace, name.
func compareGateways(a, b peerGateway) int {
	return cmp.Or(
		a.meta.GetCreationTimestamp().Compare(b.meta.GetCreationTimestamp().Time),
		strings.Compare(a.kind, b.kind),
		strings.Compare(a.meta.GetNamespace(), b.meta.GetNamespace()),
		strings.Compare(a.meta.GetName(), b.meta.GetName()))
}

// samePeerMapper maps a gateway of either kind to the gateways of kind
// connecting the same peer, so that when one of two goes, the other takes
// the peer over.
func samePeerMapper(c client.Reader, kind string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		id := obj.GetLabels()[netv1beta1.RemoteClusterIDLabel]
		if id == "" {
			return nil
		}
		gws, err := peerGateways(ctx, c, id)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "list the gateways of a peer", "remoteClusterID", id)
			return nil
		}
		var reqs []reconcile.Request
		for _, g := range gws {
			if g.kind == kind {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: g.meta.GetNamespace(), Name: g.meta.GetName()}})
			}
		}
		return reqs
	}
}

// fetchTemplate reads the template ref names, of any kind, as unstructured.
// field is the path of ref in the gateway, for messages. Templates come
// only from the install namespace or the gateway's own: whoever may create
// a gateway in one namespace must not render a template someone keeps in
// another.
func fetchTemplate(ctx context.Context, c client.Reader, ref corev1.ObjectReference, field, installNS, gatewayNS string) (*unstructured.Unstructured, error) {
	if ref.Namespace != installNS && ref.Namespace != gatewayNS {
		return nil, stall(ReasonTemplateNotAllowed, "%s.namespace: %q: templates come only from the install namespace %s or the gateway's own namespace %s",
			field, ref.Namespace, installNS, gatewayNS)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
	err := c.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, u)
	switch {
	case apierrors.IsNotFound(err):
		return nil, stall(ReasonTemplateNotFound, "%s: %s %s/%s not found", field, ref.Kind, ref.Namespace, ref.Name)
	case meta.IsNoMatchError(err):
		return nil, stall(ReasonTemplateNotFound, "%s: kind %s of %s is not served by the API server", field, ref.Kind, ref.APIVersion)
	case err != nil:
		return nil, fmt.Errorf("get %s %s %s/%s: %w", field, ref.Kind, ref.Namespace, ref.Name, err)
	}
	return u, nil
}

// checkRendered checks the kind a template rendered for a gateway before
// anything is applied: one the controller may create from a template (want,
// or one the installer allowed). The namespace needs no check: the
// renderer always puts the object in the gateway's.
func checkRendered(obj *unstructured.Unstructured, field string, want schema.GroupVersionKind, allowed []schema.GroupVersionKind) error {
	if err := templates.CheckKind(obj.GroupVersionKind(), want, allowed); err != nil {
		return stall(ReasonTemplateNotAllowed, "%s: the template's spec.objectKind %v", field, err)
	}
	return nil
}

// applyRendered applies the object rendered for a gateway, owned by it and
// labelled with the peer's ID, and replaces obj with the API server's answer.
func applyRendered(ctx context.Context, c client.Client, reader client.Reader, obj *unstructured.Unstructured, owner metav1.OwnerReference, clusterID string) error {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[netv1beta1.RemoteClusterIDLabel] = clusterID
	obj.SetLabels(labels)
	obj.SetOwnerReferences([]metav1.OwnerReference{owner})
	return applyUnstructured(ctx, c, reader, obj)
}

// objectRef is the status reference to an object.
func objectRef(u *unstructured.Unstructured) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: u.GetAPIVersion(),
		Kind:       u.GetKind(),
		Name:       u.GetName(),
		Namespace:  u.GetNamespace(),
	}
}

// isObject tells whether ref names u.
func isObject(ref *corev1.ObjectReference, u *unstructured.Unstructured) bool {
	return ref != nil && ref.APIVersion == u.GetAPIVersion() && ref.Kind == u.GetKind() &&
		ref.Name == u.GetName() && ref.Namespace == u.GetNamespace()
}

// deleteRendered deletes the object ref names (nil: none) when gw controls
// it: an object rendered for gw that must no longer run, such as the gateway
// of a kind the template no longer renders, which would otherwise run
// beside the new one until gw goes.
func deleteRendered(ctx context.Context, c client.Client, ref *corev1.ObjectReference, gw metav1.Object) error {
	if ref == nil {
		return nil
	}
	old := &unstructured.Unstructured{}
	old.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
	err := c.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, old)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get previously rendered %s %s/%s: %w", ref.Kind, ref.Namespace, ref.Name, err)
	}
	if !metav1.IsControlledBy(old, gw) {
		return nil
	}
	if err := c.Delete(ctx, old, client.Preconditions{UID: ptr.To(old.GetUID())}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete previously rendered %s %s/%s: %w", ref.Kind, ref.Namespace, ref.Name, err)
	}
	return nil
}

// renderedStatus reads the status of a rendered object. Every rendered kind
// peerlink runs reports the fields of a WgGatewayServer's status, or a
// subset of them.
func renderedStatus(u *unstructured.Unstructured) (netv1beta1.WgGatewayServerStatus, error) {
	var s netv1beta1.WgGatewayServerStatus
	m, ok := u.Object["status"].(map[string]any)
	if !ok {
		return s, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &s); err != nil {
		return s, fmt.Errorf("read status of %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return s, nil
}

// renderedOutcome is the outcome of a gateway whose rendered object u
// reports s: the gateway is Ready when that object is, Stalled when it is,
// and otherwise waits for what it waits for.
func renderedOutcome(u *unstructured.Unstructured, s netv1beta1.WgGatewayServerStatus) outcome {
	name := fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
	if s.ObservedGeneration != u.GetGeneration() {
		return progressing(ReasonWaitingForStatus, "%s has not reported on generation %d yet", name, u.GetGeneration())
	}
	if c := meta.FindStatusCondition(s.Conditions, netv1beta1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		return stalled(c.Reason, "%s: %s", name, c.Message)
	}
	c := meta.FindStatusCondition(s.Conditions, netv1beta1.ConditionReady)
	switch {
	case c == nil:
		return progressing(ReasonWaitingForStatus, "%s has no Ready condition yet", name)
	case c.Status == metav1.ConditionTrue:
		return ready(fmt.Sprintf("%s: %s", name, c.Message))
	default:
		return progressing(c.Reason, "%s: %s", name, c.Message)
	}
}

// renderFlow is what the flow GatewayServer and GatewayClient share needs of
// one gateway of either kind.
type renderFlow struct {
	gw metav1.Object
	// kind is GatewayServer or GatewayClient; server tells which.
	kind   string
	server bool
	// field is the template reference's field path, for messages.
	field       string
	templateRef corev1.ObjectReference
	// render renders the template for the gateway's peer.
	render func(tmpl *unstructured.Unstructured, clusterID string) (*unstructured.Unstructured, error)
	// rendered is the status field referring to the rendered object.
	rendered **corev1.ObjectReference
}

// run checks the gateway's peer, renders its template, applies the result
// (owned by the gateway) in place of a former rendered object, and returns
// that object and its status, for the caller to copy. A gateway that cannot
// tell its peer, or whose peer has an older gateway already, must not run a
// tunnel: what it rendered is deleted and unset is called, to empty the
// status fields taken from it.
func (f renderFlow) run(ctx context.Context, c client.Client, reader client.Reader, facts ClusterFacts,
	unset func()) (*unstructured.Unstructured, netv1beta1.WgGatewayServerStatus, error) {
	var none netv1beta1.WgGatewayServerStatus
	id, err := gatewayRemoteClusterID(f.gw, facts.ClusterID)
	if err == nil {
		err = checkUniqueGateway(ctx, c, peerGateway{f.kind, f.gw}, id)
	}
	if err != nil {
		if derr := deleteRendered(ctx, c, *f.rendered, f.gw); derr != nil {
			return nil, none, derr
		}
		*f.rendered = nil
		unset()
		return nil, none, err
	}
	tmpl, err := fetchTemplate(ctx, c, f.templateRef, f.field, facts.Namespace, f.gw.GetNamespace())
	if err != nil {
		return nil, none, err
	}
	obj, err := f.render(tmpl, id)
	if err != nil {
		return nil, none, stall(ReasonInvalidTemplate, "%s: %v", f.field, err)
	}
	if err := checkRendered(obj, f.field, templates.RenderedKind(f.server), facts.AllowedTemplateKinds); err != nil {
		return nil, none, err
	}
	owner := *metav1.NewControllerRef(f.gw, netv1beta1.GroupVersion.WithKind(f.kind))
	if err := applyRendered(ctx, c, reader, obj, owner, id); err != nil {
		return nil, none, err
	}
	if !isObject(*f.rendered, obj) {
		if err := deleteRendered(ctx, c, *f.rendered, f.gw); err != nil {
			return nil, none, err
		}
	}
	*f.rendered = objectRef(obj)
	s, err := renderedStatus(obj)
	return obj, s, err
}

// setupGateway registers r, the reconciler of gateway (a GatewayServer or a
// GatewayClient), with mgr. Besides the gateways and the object rendered
// for them (owned, a WgGatewayServer or WgGatewayClient), it watches the
// template kinds, to render again when a template changes, and the
// gateways of both kinds, so that when one of two gateways for a peer goes
// the other takes over.
func setupGateway(mgr ctrl.Manager, r reconcile.Reconciler, c client.Client, installNS string, gateway, owned client.Object) error {
	kind := "GatewayClient"
	if _, ok := gateway.(*netv1beta1.GatewayServer); ok {
		kind = "GatewayServer"
	}
	forTemplate := func(templateKind string) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, t client.Object) []reconcile.Request {
			users, err := templateUsers(ctx, c, installNS, kind)
			if err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "list gateways for a template event", "template", client.ObjectKeyFromObject(t))
				return nil
			}
			var reqs []reconcile.Request
			for key, ref := range users {
				if ref.APIVersion == netv1beta1.GroupVersion.String() && ref.Kind == templateKind &&
					ref.Namespace == t.GetNamespace() && ref.Name == t.GetName() {
					reqs = append(reqs, reconcile.Request{NamespacedName: key})
				}
			}
			return reqs
		})
	}
	samePeer := handler.EnqueueRequestsFromMapFunc(samePeerMapper(c, kind))
	return ctrl.NewControllerManagedBy(mgr).
		For(gateway).
		Owns(owned).
		Watches(&netv1beta1.WgGatewayServerTemplate{}, forTemplate(templates.ServerTemplateKind)).
		Watches(&netv1beta1.WgGatewayClientTemplate{}, forTemplate(templates.ClientTemplateKind)).
		Watches(&netv1beta1.GatewayServer{}, samePeer).
		Watches(&netv1beta1.GatewayClient{}, samePeer).
		Complete(r)
}

// templateUsers returns the gateways of kind with the template each
// references, defaults resolved against installNS.
func templateUsers(ctx context.Context, c client.Reader, installNS, kind string) (map[types.NamespacedName]corev1.ObjectReference, error) {
	users := map[types.NamespacedName]corev1.ObjectReference{}
	if kind == "GatewayServer" {
		var list netv1beta1.GatewayServerList
		if err := c.List(ctx, &list); err != nil {
			return nil, err
		}
		for i := range list.Items {
			users[client.ObjectKeyFromObject(&list.Items[i])] = templates.ServerTemplateRef(&list.Items[i].Spec, installNS)
		}
		return users, nil
	}
	var list netv1beta1.GatewayClientList
	if err := c.List(ctx, &list); err != nil {
		return nil, err
	}
	for i := range list.Items {
		users[client.ObjectKeyFromObject(&list.Items[i])] = templates.ClientTemplateRef(&list.Items[i].Spec, installNS)
	}
	return users, nil
}
