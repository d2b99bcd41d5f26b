package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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

func TestActivePod(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := func(name string, age time.Duration, phase corev1.PodPhase, node, ip string, ready bool) corev1.Pod {
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-age))},
			Spec:       corev1.PodSpec{NodeName: node},
			Status:     corev1.PodStatus{Phase: phase, PodIP: ip},
		}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		return p
	}
	deleting := pod("deleting", 0, corev1.PodRunning, "n1", "10.0.0.9", true)
	deleting.DeletionTimestamp = ptr.To(metav1.NewTime(t0))

	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want string
	}{
		{"none", nil, ""},
		{"pending, unscheduled or without IP", []corev1.Pod{
			pod("pending", 0, corev1.PodPending, "n1", "10.0.0.1", false),
			pod("unscheduled", 0, corev1.PodRunning, "", "10.0.0.2", true),
			pod("no-ip", 0, corev1.PodRunning, "n1", "", true),
			deleting,
		}, ""},
		{"ready before not ready", []corev1.Pod{
			pod("new-unready", time.Minute, corev1.PodRunning, "n1", "10.0.0.1", false),
			pod("old-ready", time.Hour, corev1.PodRunning, "n1", "10.0.0.2", true),
		}, "old-ready"},
		{"newest of the ready ones", []corev1.Pod{
			pod("old", time.Hour, corev1.PodRunning, "n1", "10.0.0.1", true),
			pod("new", time.Minute, corev1.PodRunning, "n2", "10.0.0.2", true),
		}, "new"},
		{"same age: by name", []corev1.Pod{
			pod("b", time.Hour, corev1.PodRunning, "n1", "10.0.0.1", true),
			pod("a", time.Hour, corev1.PodRunning, "n2", "10.0.0.2", true),
		}, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ActivePod(tc.pods)
			switch {
			case got == nil && tc.want != "":
				t.Errorf("no pod picked, want %s", tc.want)
			case got != nil && got.Name != tc.want:
				t.Errorf("picked %s, want %q", got.Name, tc.want)
			}
		})
	}
}
