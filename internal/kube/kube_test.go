package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPodReady(t *testing.T) {
	pod := func(conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: conds}}
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want bool
	}{
		{pod(), false},
		{pod(corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}), false},
		{pod(corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse}), false},
		{pod(corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}), true},
	} {
		if got := PodReady(tc.pod); got != tc.want {
			t.Errorf("PodReady(%v) = %v, want %v", tc.pod.Status.Conditions, got, tc.want)
		}
	}
}
