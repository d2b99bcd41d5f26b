package apply

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api"
	"github.com/peerlink/peerlink/reconciler/outcome"
)

// Unstructured server-side applies u as api.FieldManager, taking over the
// fields it sets from other managers, and replaces u with the API server's
// answer. Applying what is already there does not write: the API server
// keeps the resourceVersion of an object an apply leaves unchanged.
//
// It never takes over an object it did not make: when u names a controller
// and an object of its name exists without that controller, nothing is
// applied and the reconcile stalls, naming the object. reader reads that
// object's metadata from the API server.
func Unstructured(ctx context.Context, c client.Client, reader client.Reader, u *unstructured.Unstructured) error {
	kind, ns, name := u.GetKind(), u.GetNamespace(), u.GetName()
	if owner := metav1.GetControllerOfNoCopy(u); owner != nil {
		if err := checkNotForeign(ctx, reader, u.GroupVersionKind(), types.NamespacedName{Namespace: ns, Name: name}, *owner); err != nil {
			return err
		}
	}
	err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(api.FieldManager), client.ForceOwnership)
	if err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", kind, ns, name, err)
	}
	return nil
}

// Typed server-side applies a typed object, which must carry its
// apiVersion and kind, and replaces it with the API server's answer.
//
// A typed object cannot tell a zero field from an unset one, so what is sent
// is what its JSON form holds: fields tagged omitempty are left out when
// zero, nulls are dropped (they would ask for nothing), and status is left
// out since it is not the controller's to declare.
func Typed(ctx context.Context, c client.Client, reader client.Reader, obj client.Object) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("convert %T %s/%s for apply: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	delete(m, "status")
	dropNulls(m)
	u := &unstructured.Unstructured{Object: m}
	if err := Unstructured(ctx, c, reader, u); err != nil {
		return err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return fmt.Errorf("convert applied %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// ReasonForeignObject: an object the controller would make already exists
// and was not made by it.
const ReasonForeignObject = "ForeignObject"

// checkNotForeign stalls when the object key of kind gvk exists and is not
// controlled by owner: someone else made it, and adopting it would hand
// the owner (or whoever made it) what it holds.
func checkNotForeign(ctx context.Context, reader client.Reader, gvk schema.GroupVersionKind, key types.NamespacedName, owner metav1.OwnerReference) error {
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(gvk)
	err := reader.Get(ctx, key, existing)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %s %s: %w", gvk.Kind, key, err)
	}
	if ref := metav1.GetControllerOfNoCopy(existing); ref != nil && ref.UID == owner.UID {
		return nil
	}
	return outcome.Stall(ReasonForeignObject, "%s %s exists and is not controlled by %s %s: peerlink does not take over objects it did not make; delete or rename it",
		gvk.Kind, key, owner.Kind, owner.Name)
}

// dropNulls removes the null values of maps, at any depth.
func dropNulls(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if e == nil {
				delete(v, k)
				continue
			}
			dropNulls(e)
		}
	case []any:
		for _, e := range v {
			dropNulls(e)
		}
	}
}
