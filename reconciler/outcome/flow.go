package outcome

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// Flow is the reconcile of one object of a kind: read it by key, run the
// reconciler's steps unless it is being deleted (the garbage collector
// removes what it owns), record their outcome in its kstatus conditions
// and write its status when it changed.
type Flow[T client.Object] struct {
	// New returns an empty object of the kind.
	New func() T
	// Conditions points into an object at its kstatus conditions.
	Conditions func(T) *netv1beta1.CommonStatus
	// Status returns the whole status of an object, compared to tell
	// whether to write.
	Status func(T) any
	// Gone, when set, is told the key of an object that is not found or
	// is being deleted.
	Gone func(types.NamespacedName)
	// Record, when set, adds to an object's status what the outcome means
	// besides the kstatus conditions (a kind's own conditions).
	Record func(T, Outcome)
	// Changed, when set, is told of an outcome that changed the status
	// written (to emit an event).
	Changed func(T, Outcome)
}

// Reconcile runs the flow for the object key with the steps body. The
// result asks for the object again after the outcome's After.
func (f Flow[T]) Reconcile(ctx context.Context, c client.Client, key types.NamespacedName,
	body func(context.Context, T) (Outcome, error)) (ctrl.Result, error) {
	obj := f.New()
	if err := c.Get(ctx, key, obj); err != nil {
		if client.IgnoreNotFound(err) == nil && f.Gone != nil {
			f.Gone(key)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		if f.Gone != nil {
			f.Gone(key)
		}
		return ctrl.Result{}, nil
	}
	before := obj.DeepCopyObject().(T)
	o, err := Conclude(body(ctx, obj))
	SetKstatus(f.Conditions(obj), obj.GetGeneration(), o)
	if f.Record != nil {
		f.Record(obj, o)
	}
	changed := !equality.Semantic.DeepEqual(f.Status(before), f.Status(obj))
	if perr := PatchStatus(ctx, c, before, obj, f.Status); perr != nil {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	if changed && f.Changed != nil {
		f.Changed(obj, o)
	}
	return ctrl.Result{RequeueAfter: o.After}, err
}

// PatchStatus writes the status of obj with a merge patch against before,
// and only when the two statuses differ: a reconcile that changes nothing
// must not write, or every watch event would bump the resourceVersion.
// status returns the status of an object of obj's type.
func PatchStatus[T client.Object](ctx context.Context, c client.Client, before, obj T, status func(T) any) error {
	if equality.Semantic.DeepEqual(status(before), status(obj)) {
		return nil
	}
	if err := c.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("patch status of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
