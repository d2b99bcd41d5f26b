package outcome

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// State is where one reconcile left an object, in kstatus terms.
type State int

const (
	// StateReady: the declared state is in effect.
	StateReady State = iota
	// StateProgressing: the controller waits for something that will
	// happen without a change of the input (a pod to start, an address to
	// appear).
	StateProgressing
	// StateStalled: progress needs a change of the input.
	StateStalled
)

// Outcome is the conclusion of one reconcile, written into the kstatus
// conditions of the object.
type Outcome struct {
	State   State
	Reason  string
	Message string
	// After, when set, is how soon the object is to be looked at again
	// though no watched input changes.
	After time.Duration
}

// Ready is the outcome of an object whose declared state is in effect.
func Ready(message string) Outcome {
	return Outcome{State: StateReady, Reason: ReasonReconciled, Message: message}
}

// Progressing is the outcome of an object waiting for something that will
// happen by itself; reason names what is awaited.
func Progressing(reason, format string, args ...any) Outcome {
	return Outcome{State: StateProgressing, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Stalled is the outcome of an object that needs a change of its input.
func Stalled(reason, format string, args ...any) Outcome {
	return Outcome{State: StateStalled, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// StallError is a failure only a change of the input repairs. The object is
// marked Stalled with its reason and message and the request is not
// retried, unless After is set: a watch on the faulty input brings it back.
type StallError struct {
	Reason  string
	Message string
	// After, when set, is how soon to look again: for an input that may
	// change where no watch sees it (another object freeing a range).
	After time.Duration
}

func (e *StallError) Error() string { return e.Message }

// Stall returns a StallError.
func Stall(reason, format string, args ...any) error {
	return &StallError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// StallRetry returns a StallError looked at again after the pause after.
func StallRetry(after time.Duration, reason, format string, args ...any) error {
	return &StallError{Reason: reason, Message: fmt.Sprintf(format, args...), After: after}
}

// IsStall tells whether err is or wraps a StallError.
func IsStall(err error) bool {
	var se *StallError
	return errors.As(err, &se)
}

// Conclude turns what a reconcile's steps returned into the outcome to
// record and the error to hand to controller-runtime: a StallError stalls
// the object (retried only after its After), any other error marks it Reconciling and is
// retried with backoff.
func Conclude(o Outcome, err error) (Outcome, error) {
	var se *StallError
	switch {
	case err == nil:
		return o, nil
	case errors.As(err, &se):
		return Outcome{State: StateStalled, Reason: se.Reason, Message: se.Message, After: se.After}, nil
	default:
		return Progressing(ReasonReconcileError, "%v", err), err
	}
}

// SetKstatus records o in status as the Ready, Reconciling and Stalled
// conditions of generation gen. Reconciling and Stalled are removed when
// they do not apply, as kstatus reads their absence as False. A condition
// whose status does not change keeps its lastTransitionTime, so the same
// outcome twice leaves status identical and a status patch writes nothing.
func SetKstatus(status *netv1beta1.CommonStatus, gen int64, o Outcome) {
	status.ObservedGeneration = gen
	set := func(condType string, s metav1.ConditionStatus) {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type:               condType,
			Status:             s,
			Reason:             o.Reason,
			Message:            o.Message,
			ObservedGeneration: gen,
		})
	}
	switch o.State {
	case StateReady:
		set(netv1beta1.ConditionReady, metav1.ConditionTrue)
		meta.RemoveStatusCondition(&status.Conditions, netv1beta1.ConditionReconciling)
		meta.RemoveStatusCondition(&status.Conditions, netv1beta1.ConditionStalled)
	case StateProgressing:
		set(netv1beta1.ConditionReady, metav1.ConditionFalse)
		set(netv1beta1.ConditionReconciling, metav1.ConditionTrue)
		meta.RemoveStatusCondition(&status.Conditions, netv1beta1.ConditionStalled)
	case StateStalled:
		set(netv1beta1.ConditionReady, metav1.ConditionFalse)
		set(netv1beta1.ConditionStalled, metav1.ConditionTrue)
		meta.RemoveStatusCondition(&status.Conditions, netv1beta1.ConditionReconciling)
	}
}
