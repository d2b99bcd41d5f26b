package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// Reasons shared by the reconcilers.
const (
	// ReasonReconciled is the reason of a True Ready condition.
	ReasonReconciled = "Reconciled"
	// ReasonReconcileError marks a failure that is retried, such as an
	// unreachable API server; the message is the error.
	ReasonReconcileError = "ReconcileError"
)

// state is where one reconcile left an object, in kstatus terms.
type state int

const (
	// stateReady: the declared state is in effect.
	stateReady state = iota
	// stateProgressing: the controller waits for something that will happen
	// without a change of the input (a pod to start, an address to appear).
	stateProgressing
	// stateStalled: progress needs a change of the input.
	stateStalled
)

// outcome is the conclusion of one reconcile, written into the kstatus
// conditions of the object.
type outcome struct {
	state   state
	reason  string
	message string
	// after, when set, is how soon the object is to be looked at again
	// though no watched input changes.
	after time.Duration
}

// ready is the outcome of an object whose declared state is in effect.
func ready(message string) outcome {
	return outcome{state: stateReady, reason: ReasonReconciled, message: message}
}

// progressing is the outcome of an object waiting for something that will
// happen by itself; reason names what is awaited.
func progressing(reason, format string, args ...any) outcome {
	return outcome{state: stateProgressing, reason: reason, message: fmt.Sprintf(format, args...)}
}

// stalled is the outcome of an object that needs a change of its input.
func stalled(reason, format string, args ...any) outcome {
	return outcome{state: stateStalled, reason: reason, message: fmt.Sprintf(format, args...)}
}

// stallError is a failure only a change of the input repairs. The object is
// marked Stalled with its reason and message and the request is not retried:
// a watch on the faulty input brings it back.
type stallError struct {
	reason  string
	message string
}

func (e *stallError) Error() string { return e.message }

// stall returns a stallError.
func stall(reason, format string, args ...any) error {
	return &stallError{reason: reason, message: fmt.Sprintf(format, args...)}
}

// conclude turns what a reconcile's steps returned into the outcome to record
// and the error to hand to controller-runtime: a stallError stalls the object
// without a retry, any other error marks it Reconciling and is retried with
// backoff.
func conclude(o outcome, err error) (outcome, error) {
	var se *stallError
	switch {
	case err == nil:
		return o, nil
	case errors.As(err, &se):
		return outcome{state: stateStalled, reason: se.reason, message: se.message}, nil
	default:
		return progressing(ReasonReconcileError, "%v", err), err
	}
}

// setKstatus records o in status as the Ready, Reconciling and Stalled
// conditions of generation gen. Reconciling and Stalled are removed when they
// do not apply, as kstatus reads their absence as False. A condition whose
// status does not change keeps its lastTransitionTime, so the same outcome
// twice leaves status identical and patchStatus writes nothing.
func setKstatus(status *netv1beta1.CommonStatus, gen int64, o outcome) {
	status.ObservedGeneration = gen
	set := func(condType string, s metav1.ConditionStatus) {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type:               condType,
			Status:             s,
			Reason:             o.reason,
			Message:            o.message,
			ObservedGeneration: gen,
		})
	}
	switch o.state {
	case stateReady:
		set(netv1beta1.ConditionReady, metav1.ConditionTrue)
		meta.RemoveStatusCondition(&status.Conditions, netv1beta1.ConditionReconciling)
		meta.RemoveStatusCondition(&status.Conditions, netv1beta1.ConditionStalled)
	case stateProgressing:
		set(netv1beta1.ConditionReady, metav1.ConditionFalse)
		set(netv1beta1.ConditionReconciling, metav1.ConditionTrue)
		meta.RemoveStatusCondition(&status.Conditions, netv1beta1.ConditionStalled)
	case stateStalled:
		set(netv1beta1.ConditionReady, metav1.ConditionFalse)
		set(netv1beta1.ConditionStalled, metav1.ConditionTrue)
		meta.RemoveStatusCondition(&status.Conditions, netv1beta1.ConditionReconciling)
	}
}

// objectKind is one of the gateway kinds (GatewayServer, GatewayClient,
// WgGatewayServer, WgGatewayClient) as the code they share needs it.
type objectKind[T client.Object] struct {
	// name is the kind, as the kind field of an object says it.
	name      string
	newObject func() T
	newList   func() client.ObjectList
	// status points into an object of the kind at its status.
	status func(T) statusFields
}

// kindOf returns kind name, whose objects are of Go type O, listed as L,
// with status pointing into their status.
func kindOf[O, L any, T interface {
	*O
	client.Object
}, PL interface {
	*L
	client.ObjectList
}](name string, status func(T) statusFields) objectKind[T] {
	return objectKind[T]{
		name:      name,
		newObject: func() T { return new(O) },
		newList:   func() client.ObjectList { return PL(new(L)) },
		status:    status,
	}
}

// statusFields point into the status of an object of a gateway kind. Every
// kind reports its kstatus conditions, its key Secret with the public key it
// holds, and its active pod; a server kind where it is reachable; a Gateway
// kind the object rendered for it. A field the kind lacks is nil.
type statusFields struct {
	// all is the whole status, compared to tell whether to write.
	all      any
	common   *netv1beta1.CommonStatus
	gateway  *netv1beta1.GatewayStatus
	endpoint **netv1beta1.EndpointStatus
	rendered **corev1.ObjectReference
	rotation **netv1beta1.KeyRotationStatus
}

// report copies into f what s, the status of the object rendered for a
// gateway, reports.
func (f statusFields) report(s netv1beta1.WgGatewayServerStatus) {
	*f.gateway = s.GatewayStatus
	if f.endpoint != nil {
		*f.endpoint = s.Endpoint
	}
}

// list returns the objects of the kind that c lists with opts.
func (k objectKind[T]) list(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]T, error) {
	l := k.newList()
	if err := c.List(ctx, l, opts...); err != nil {
		return nil, fmt.Errorf("list %s objects: %w", k.name, err)
	}
	var objs []T
	err := meta.EachListItem(l, func(o runtime.Object) error {
		objs = append(objs, o.(T))
		return nil
	})
	return objs, err
}

// requestsFor returns the map function of a watch: it brings back the
// objects of the kind that match accepts for the object of the event.
func (k objectKind[T]) requestsFor(c client.Reader, match func(event client.Object, obj T) bool) handler.MapFunc {
	return func(ctx context.Context, event client.Object) []reconcile.Request {
		objs, err := k.list(ctx, c)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "list the objects an event brings back", "event", client.ObjectKeyFromObject(event))
			return nil
		}
		var reqs []reconcile.Request
		for _, o := range objs {
			if match(event, o) {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
			}
		}
		return reqs
	}
}

// reconcileObject is the flow of every reconciler of a gateway kind: read
// the object of kind by key, run body unless the object is being deleted
// (the garbage collector removes what it owns), set the kstatus conditions
// from body's outcome and write the status when it changed.
func reconcileObject[T client.Object](ctx context.Context, c client.Client, key types.NamespacedName, kind objectKind[T],
	body func(context.Context, T) (outcome, error)) (ctrl.Result, error) {
	obj := kind.newObject()
	if err := c.Get(ctx, key, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, nil
	}
	before := obj.DeepCopyObject().(T)
	o, err := conclude(body(ctx, obj))
	setKstatus(kind.status(obj).common, obj.GetGeneration(), o)
	if perr := patchStatus(ctx, c, before, obj, func(o T) any { return kind.status(o).all }); perr != nil {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	return ctrl.Result{RequeueAfter: o.after}, err
}

// patchStatus writes the status of obj with a merge patch against before,
// and only when the two statuses differ: a reconcile that changes nothing
// must not write, or every watch event would bump the resourceVersion.
// status returns the status of an object of obj's type.
func patchStatus[T client.Object](ctx context.Context, c client.Client, before, obj T, status func(T) any) error {
	if equality.Semantic.DeepEqual(status(before), status(obj)) {
		return nil
	}
	if err := c.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("patch status of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
