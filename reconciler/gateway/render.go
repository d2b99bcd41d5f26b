package gateway

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/reconciler/apply"
	"github.com/peerlink/peerlink/reconciler/outcome"
	"github.com/peerlink/peerlink/templates"
)

// Reasons a GatewayServer or GatewayClient stalls or waits with while
// its template is rendered.
const (
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

// fetchTemplate reads the template ref names, of any kind, as unstructured.
// field is the path of ref in the gateway, for messages. Templates come
// only from the install namespace or the gateway's own: whoever may create
// a gateway in one namespace must not render a template someone keeps in
// another.
func fetchTemplate(ctx context.Context, c client.Reader, ref corev1.ObjectReference, field, installNS, gatewayNS string) (*unstructured.Unstructured, error) {
	if ref.Namespace != installNS && ref.Namespace != gatewayNS {
		return nil, outcome.Stall(ReasonTemplateNotAllowed, "%s.namespace: %q: templates come only from the install namespace %s or the gateway's own namespace %s",
			field, ref.Namespace, installNS, gatewayNS)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
	err := c.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, u)
	switch {
	case apierrors.IsNotFound(err):
		return nil, outcome.Stall(ReasonTemplateNotFound, "%s: %s %s/%s not found", field, ref.Kind, ref.Namespace, ref.Name)
	case meta.IsNoMatchError(err):
		return nil, outcome.Stall(ReasonTemplateNotFound, "%s: kind %s of %s is not served by the API server", field, ref.Kind, ref.APIVersion)
	case err != nil:
		return nil, fmt.Errorf("get %s %s %s/%s: %w", field, ref.Kind, ref.Namespace, ref.Name, err)
	}
	return u, nil
}

// substituteTemplate returns the template reference to render for a
// gateway in namespace gatewayNS: ref itself, or, when ref names a default
// template (IsDefaultTemplate) in a namespace that neither holds the
// installed templates nor the gateway and does not exist here (Liqo's
// manifests name liqo, where Liqo keeps its templates), the same template
// in the install namespace installNS, with a message saying so. field is
// the path of ref in the gateway, for the message. Any other reference is
// left for fetchTemplate to judge.
func substituteTemplate(ctx context.Context, c client.Reader, ref corev1.ObjectReference, field string, server bool, installNS, gatewayNS string) (corev1.ObjectReference, string, error) {
	if ref.Namespace == installNS || ref.Namespace == gatewayNS || !templates.IsDefaultTemplate(ref, server) {
		return ref, "", nil
	}
	err := c.Get(ctx, types.NamespacedName{Name: ref.Namespace}, &corev1.Namespace{})
	switch {
	case err == nil:
		return ref, "", nil
	case !apierrors.IsNotFound(err):
		return ref, "", fmt.Errorf("get namespace %s of %s: %w", ref.Namespace, field, err)
	}
	msg := fmt.Sprintf("%s.namespace: namespace %s does not exist in this cluster: rendering the installed default %s %s/%s instead",
		field, ref.Namespace, ref.Kind, installNS, ref.Name)
	ref.Namespace = installNS
	return ref, msg, nil
}

// checkRendered checks the kind a template rendered for a gateway before
// anything is applied: one the controller may create from a template (want,
// or one the installer allowed). The namespace needs no check: the
// renderer always puts the object in the gateway's.
func checkRendered(obj *unstructured.Unstructured, field string, want schema.GroupVersionKind, allowed []schema.GroupVersionKind) error {
	if err := templates.CheckKind(obj.GroupVersionKind(), want, allowed); err != nil {
		return outcome.Stall(ReasonTemplateNotAllowed, "%s: the template's spec.objectKind %v", field, err)
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
	return apply.Unstructured(ctx, c, reader, obj)
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
func renderedOutcome(u *unstructured.Unstructured, s netv1beta1.WgGatewayServerStatus) outcome.Outcome {
	name := fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
	if s.ObservedGeneration != u.GetGeneration() {
		return outcome.Progressing(ReasonWaitingForStatus, "%s has not reported on generation %d yet", name, u.GetGeneration())
	}
	if c := meta.FindStatusCondition(s.Conditions, netv1beta1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		return outcome.Stalled(c.Reason, "%s: %s", name, c.Message)
	}
	c := meta.FindStatusCondition(s.Conditions, netv1beta1.ConditionReady)
	switch {
	case c == nil:
		return outcome.Progressing(ReasonWaitingForStatus, "%s has no Ready condition yet", name)
	case c.Status == metav1.ConditionTrue:
		return outcome.Ready(fmt.Sprintf("%s: %s", name, c.Message))
	default:
		return outcome.Progressing(c.Reason, "%s: %s", name, c.Message)
	}
}
