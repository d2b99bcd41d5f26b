package peering

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// ParseServiceRef reads a Service named as NAMESPACE/NAME.
func ParseServiceRef(arg string) (ns, name string, err error) {
	ns, name, ok := strings.Cut(arg, "/")
	if !ok {
		return "", "", fmt.Errorf("service %q: give it as NAMESPACE/NAME", arg)
	}
	for _, part := range []string{ns, name} {
		if msgs := validation.IsDNS1123Label(part); len(msgs) > 0 {
			return "", "", fmt.Errorf("service %q: %q: %s", arg, part, strings.Join(msgs, "; "))
		}
	}
	return ns, name, nil
}

// ServiceExport builds the ServiceExport that exports the Service ns/name
// to every peer.
func ServiceExport(ns, name string) *mcsv1beta1.ServiceExport {
	return &mcsv1beta1.ServiceExport{
		TypeMeta:   metav1.TypeMeta{APIVersion: mcsv1beta1.GroupVersion.String(), Kind: "ServiceExport"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
	}
}

// ExportService applies the ServiceExport of the Service ns/name and, with
// wait, waits until the controller reports it Valid and Ready, saying
// whether it conflicts with other clusters' exports.
func ExportService(ctx context.Context, c client.Client, p Progress, ns, name string, wait bool) error {
	if err := Apply(ctx, c, ServiceExport(ns, name)); err != nil {
		return err
	}
	p.Infof("ServiceExport %s/%s applied", ns, name)
	if !wait {
		return nil
	}
	state, err := p.Wait(ctx, "ServiceExport "+ns+"/"+name+" to be exported", func(ctx context.Context) (bool, string, error) {
		var se mcsv1beta1.ServiceExport
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &se); err != nil {
			return false, "", err
		}
		valid := meta.FindStatusCondition(se.Status.Conditions, string(mcsv1beta1.ServiceExportConditionValid))
		if valid != nil && valid.Status == metav1.ConditionFalse {
			return false, "", fmt.Errorf("ServiceExport %s/%s is not valid: %s: %s", ns, name, valid.Reason, valid.Message)
		}
		ready := meta.FindStatusCondition(se.Status.Conditions, string(mcsv1beta1.ServiceExportConditionReady))
		if ready == nil || ready.Status != metav1.ConditionTrue {
			return false, "not exported yet", nil
		}
		if conflict := meta.FindStatusCondition(se.Status.Conditions, string(mcsv1beta1.ServiceExportConditionConflict)); conflict != nil && conflict.Status == metav1.ConditionTrue {
			return true, "exported, in conflict: " + conflict.Reason + ": " + conflict.Message, nil
		}
		return true, "exported", nil
	})
	if err != nil {
		return err
	}
	p.Infof("ServiceExport %s/%s %s", ns, name, state)
	return nil
}

// UnexportService deletes the ServiceExport of the Service ns/name: the
// peers drop their import of it.
func UnexportService(ctx context.Context, c client.Client, p Progress, ns, name string) error {
	if err := c.Delete(ctx, ServiceExport(ns, name)); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("service %s/%s is not exported (no ServiceExport)", ns, name)
		}
		return fmt.Errorf("delete ServiceExport %s/%s: %w", ns, name, err)
	}
	p.Infof("ServiceExport %s/%s deleted: the peers drop their import", ns, name)
	return nil
}
