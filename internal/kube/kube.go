package kube

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// ActiveDeletionCost is the deletion cost (annotation
// controller.kubernetes.io/pod-deletion-cost) of a gateway's active pod,
// above its standbys' (none, 0): when a rollout scales the former
// ReplicaSet down, the ReplicaSet removes its standbys first and its
// active pod last, so the tunnel is handed over once, to a pod of the new
// ReplicaSet, not first to another former pod and then again. The active
// replica sets it on its own pod with the active label; the controller
// sets it on an active pod that lacks it (one of an earlier release).
const ActiveDeletionCost = "1"

// PodReady tells whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ActivePod chooses, among the pods labelled active of one gateway, the one
// carrying its traffic, nil for none: Running on a node with an IP, Ready
// ones first, then the newest (during a rollout the new pod takes over),
// then by name so the choice is stable. The controller publishes this
// choice and every node's fabric makes the same one.
func ActivePod(pods []corev1.Pod) *corev1.Pod {
	var running []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" && p.Status.PodIP != "" {
			running = append(running, p)
		}
	}
	if len(running) == 0 {
		return nil
	}
	slices.SortFunc(running, func(a, b *corev1.Pod) int {
		if ra, rb := PodReady(a), PodReady(b); ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return running[0]
}

// HasAll tells whether have holds every key of want, with its value, as
// an object's labels or annotations hold what a writer set on them.
func HasAll(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}
