package reconciler

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager is the server-side apply field manager of every object the
// controller writes.
const FieldManager = "peerlink"

// applyUnstructured server-side applies u as FieldManager, taking over the
// fields it sets from other managers, and replaces u with the API server's
// answer. Applying what is already there does not write: the API server
// keeps the resourceVersion of an object an apply leaves unchanged.
func applyUnstructured(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	kind, ns, name := u.GetKind(), u.GetNamespace(), u.GetName()
	err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership)
	if err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", kind, ns, name, err)
	}
	return nil
}

// applyTyped server-side applies a typed object, which must carry its
// apiVersion and kind, and replaces it with the API server's answer.
//
// A typed object cannot tell a zero field from an unset one, so what is sent
// is what its JSON form holds: fields tagged omitempty are left out when
// zero, nulls are dropped (they would ask for nothing), and status is left
// out since it is not the controller's to declare.
func applyTyped(ctx context.Context, c client.Client, obj client.Object) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("convert %T %s/%s for apply: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	delete(m, "status")
	dropNulls(m)
	u := &unstructured.Unstructured{Object: m}
	if err := applyUnstructured(ctx, c, u); err != nil {
		return err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return fmt.Errorf("convert applied %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
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
