package outcome

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// Reasons of the gateway reconcilers, as examples.
const (
	ReasonWaitingForGatewayPod = "WaitingForGatewayPod"
	ReasonInvalidKeys          = "InvalidKeys"
)

func TestSetKstatus(t *testing.T) {
	var s netv1beta1.CommonStatus
	check := func(step string, gen int64, want map[string]metav1.ConditionStatus) {
		t.Helper()
		if s.ObservedGeneration != gen {
			t.Errorf("%s: observedGeneration %d, want %d", step, s.ObservedGeneration, gen)
		}
		if len(s.Conditions) != len(want) {
			t.Errorf("%s: conditions %+v, want %v", step, s.Conditions, want)
		}
		for typ, st := range want {
			if !meta.IsStatusConditionPresentAndEqual(s.Conditions, typ, st) {
				t.Errorf("%s: %s is not %s in %+v", step, typ, st, s.Conditions)
			}
		}
	}

	SetKstatus(&s, 1, Progressing(ReasonWaitingForGatewayPod, "no pod"))
	check("progressing", 1, map[string]metav1.ConditionStatus{
		netv1beta1.ConditionReady: metav1.ConditionFalse, netv1beta1.ConditionReconciling: metav1.ConditionTrue,
	})

	// The same outcome again changes nothing, not even a timestamp: this is
	// what lets a reconcile with nothing new skip the status write.
	for i := range s.Conditions {
		s.Conditions[i].LastTransitionTime = metav1.NewTime(time.Now().Add(-time.Hour))
	}
	before := *s.DeepCopy()
	SetKstatus(&s, 1, Progressing(ReasonWaitingForGatewayPod, "no pod"))
	if !equality.Semantic.DeepEqual(before, s) {
		t.Errorf("same outcome changed status:\n%+v\n%+v", before, s)
	}

	SetKstatus(&s, 2, Stalled(ReasonInvalidKeys, "bad key"))
	check("stalled", 2, map[string]metav1.ConditionStatus{
		netv1beta1.ConditionReady: metav1.ConditionFalse, netv1beta1.ConditionStalled: metav1.ConditionTrue,
	})
	if c := meta.FindStatusCondition(s.Conditions, netv1beta1.ConditionReady); c.Reason != ReasonInvalidKeys || c.Message != "bad key" || c.ObservedGeneration != 2 {
		t.Errorf("ready condition %+v", c)
	}

	SetKstatus(&s, 2, Ready("up"))
	check("ready", 2, map[string]metav1.ConditionStatus{netv1beta1.ConditionReady: metav1.ConditionTrue})
}

func TestConclude(t *testing.T) {
	o, err := Conclude(Outcome{}, fmt.Errorf("ensure keys: %w", Stall(ReasonInvalidKeys, "secret ns/k: data.privateKey is missing")))
	if err != nil || o.State != StateStalled || o.Reason != ReasonInvalidKeys || o.Message != "secret ns/k: data.privateKey is missing" {
		t.Errorf("wrapped stall: %+v, %v", o, err)
	}
	transient := errors.New("connection refused")
	o, err = Conclude(Outcome{}, transient)
	if !errors.Is(err, transient) || o.State != StateProgressing || o.Reason != ReasonReconcileError {
		t.Errorf("transient error: %+v, %v", o, err)
	}
	want := Ready("fine")
	if o, err := Conclude(want, nil); err != nil || o != want {
		t.Errorf("success: %+v, %v", o, err)
	}
}
