package reconciler

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

	setKstatus(&s, 1, progressing(ReasonWaitingForGatewayPod, "no pod"))
	check("progressing", 1, map[string]metav1.ConditionStatus{
		netv1beta1.ConditionReady: metav1.ConditionFalse, netv1beta1.ConditionReconciling: metav1.ConditionTrue,
	})

	// The same outcome again changes nothing, not even a timestamp: this is
	// what lets a reconcile with nothing new skip the status write.
	for i := range s.Conditions {
		s.Conditions[i].LastTransitionTime = metav1.NewTime(time.Now().Add(-time.Hour))
	}
	before := *s.DeepCopy()
	setKstatus(&s, 1, progressing(ReasonWaitingForGatewayPod, "no pod"))
	if !equality.Semantic.DeepEqual(before, s) {
		t.Errorf("same outcome changed status:\n%+v\n%+v", before, s)
	}

	setKstatus(&s, 2, stalled(ReasonInvalidKeys, "bad key"))
	check("stalled", 2, map[string]metav1.ConditionStatus{
		netv1beta1.ConditionReady: metav1.ConditionFalse, netv1beta1.ConditionStalled: metav1.ConditionTrue,
	})
	if c := meta.FindStatusCondition(s.Conditions, netv1beta1.ConditionReady); c.Reason != ReasonInvalidKeys || c.Message != "bad key" || c.ObservedGeneration != 2 {
		t.Errorf("ready condition %+v", c)
	}

	setKstatus(&s, 2, ready("up"))
	check("ready", 2, map[string]metav1.ConditionStatus{netv1beta1.ConditionReady: metav1.ConditionTrue})
}

func TestConclude(t *testing.T) {
	o, err := conclude(outcome{}, fmt.Errorf("ensure keys: %w", stall(ReasonInvalidKeys, "secret ns/k: data.privateKey is missing")))
	if err != nil || o.state != stateStalled || o.reason != ReasonInvalidKeys || o.message != "secret ns/k: data.privateKey is missing" {
		t.Errorf("wrapped stall: %+v, %v", o, err)
	}
	transient := errors.New("connection refused")
	o, err = conclude(outcome{}, transient)
	if !errors.Is(err, transient) || o.state != stateProgressing || o.reason != ReasonReconcileError {
		t.Errorf("transient error: %+v, %v", o, err)
	}
	want := ready("fine")
	if o, err := conclude(want, nil); err != nil || o != want {
		t.Errorf("success: %+v, %v", o, err)
	}
}
