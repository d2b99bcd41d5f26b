package testcluster

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peerlink/peerlink/api"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// Current reads the conditions peerlink's controllers write as kstatus
// does, and takes a status no controller wrote for not reconciled.
func TestCurrent(t *testing.T) {
	scheme, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cond := func(typ string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: "Test", ObservedGeneration: 2}
	}
	ready := cond(netv1beta1.ConditionReady, metav1.ConditionTrue)
	notReady := cond(netv1beta1.ConditionReady, metav1.ConditionFalse)
	for _, tc := range []struct {
		name       string
		observed   int64
		conditions []metav1.Condition
		want       bool
	}{
		{name: "no status", want: false},
		{name: "ready", observed: 2, conditions: []metav1.Condition{ready}, want: true},
		{name: "ready for the generation before", observed: 1, conditions: []metav1.Condition{ready}, want: false},
		{name: "reconciling", observed: 2, conditions: []metav1.Condition{notReady, cond(netv1beta1.ConditionReconciling, metav1.ConditionTrue)}, want: false},
		{name: "stalled", observed: 2, conditions: []metav1.Condition{notReady, cond(netv1beta1.ConditionStalled, metav1.ConditionTrue)}, want: false},
		{name: "not ready", observed: 2, conditions: []metav1.Condition{notReady}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &netv1beta1.Configuration{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "n", Generation: 2}}
			c.Status.ObservedGeneration = tc.observed
			c.Status.Conditions = tc.conditions
			got, why, err := Current(scheme, c)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Current = %v (%s), want %v", got, why, tc.want)
			}
		})
	}
}
