package testcluster

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Current reports whether obj is reconciled for its generation, as kstatus
// (the library behind kubectl wait, Flux's and Argo CD's health) reads it:
// status.observedGeneration is metadata.generation and, of the conditions,
// neither Reconciling nor Stalled is True, and Ready, when there is one, is
// True (peerlink's controllers write it with every observedGeneration).
// When it is not, the string says why. scheme gives obj's kind, which kstatus reads for the
// kinds with rules of their own (Deployments, Pods, ...).
//
// An object without status.observedGeneration is not current: peerlink's
// controllers always write it, so its absence means no controller has
// acted yet, where kstatus, lenient for kinds it knows nothing of, would
// take an empty status for current.
func Current(scheme *runtime.Scheme, obj client.Object) (bool, string, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return false, "", err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return false, "", fmt.Errorf("%s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	if _, found, _ := unstructured.NestedInt64(content, "status", "observedGeneration"); !found {
		return false, "status.observedGeneration is not set", nil
	}
	res, err := status.Compute(u)
	if err != nil {
		return false, "", fmt.Errorf("%s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	return res.Status == status.CurrentStatus, res.Status.String() + ": " + res.Message, nil
}
