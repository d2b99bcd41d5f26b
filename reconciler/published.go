package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/templates"
)

const (
	// publishResync is how often a published object is applied again, so
	// that one deleted by hand comes back without a watch (a ConfigMap
	// watch would cache every ConfigMap of the cluster). Applying unchanged
	// data writes nothing.
	publishResync = 5 * time.Minute
	// publishRetry is the pause after a failed apply: the first ones fail
	// while the API server does not serve the CRDs installed with the
	// controller yet.
	publishRetry = 5 * time.Second
)

// publisher keeps objects the controller owns in its namespace applied:
// the cluster-info ConfigMap and the default gateway templates. It runs on
// the leader only, as a manager Runnable.
type publisher struct {
	// what names the objects in the log.
	what  string
	apply func(context.Context) error
}

// Start applies the objects, then again every publishResync (sooner after
// a failure), until ctx ends.
func (p *publisher) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("publish").WithValues("objects", p.what)
	for {
		wait := publishResync
		if err := p.apply(ctx); err != nil {
			log.Error(err, "apply")
			wait = publishRetry
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// clusterInfoPublisher keeps the cluster-info ConfigMap in line with the
// facts; a change by hand is overwritten.
func clusterInfoPublisher(c client.Client, facts ClusterFacts) *publisher {
	return &publisher{what: "configmap " + facts.Namespace + "/" + clusterinfo.Name, apply: func(ctx context.Context) error {
		cm := facts.Info.ApplyConfiguration(facts.Namespace)
		if err := c.Apply(ctx, cm, client.FieldOwner(api.FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply configmap %s/%s: %w", facts.Namespace, clusterinfo.Name, err)
		}
		return nil
	}}
}

// defaultTemplatesPublisher keeps the default gateway templates
// (templates.Defaults, running image, the controller's own, when set) in
// the controller's namespace, so that installing peerlink needs no custom
// resource applied with its CRDs. They are applied
// without forcing: a field someone else has set since (an admin's edit, a
// GitOps tool shipping its own version) stays theirs, and the template is
// left as it is, with a log line saying so.
func defaultTemplatesPublisher(c client.Client, namespace, image string) *publisher {
	return &publisher{what: "default gateway templates in " + namespace, apply: func(ctx context.Context) error {
		objs, err := templates.Defaults()
		if err != nil {
			return err
		}
		objs = templates.WithImage(objs, image)
		var errs []error
		for _, obj := range objs {
			obj.SetNamespace(namespace)
			err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(api.FieldManager))
			switch {
			case apierrors.IsConflict(err):
				ctrl.LoggerFrom(ctx).Info("default template edited by another manager: left as it is",
					"kind", obj.GetKind(), "namespace", namespace, "name", obj.GetName(), "conflict", err.Error())
			case err != nil:
				errs = append(errs, fmt.Errorf("apply %s %s/%s: %w", obj.GetKind(), namespace, obj.GetName(), err))
			}
		}
		return errors.Join(errs...)
	}}
}

// clusterPropertyGroup is the API group of ClusterProperty (KEP-2149).
const clusterPropertyGroup = "about.k8s.io"

// clusterIDProperty is the ClusterProperty that holds the cluster's ID in
// the clusterset.
const clusterIDProperty = "cluster.clusterset.k8s.io"

// clusterPropertyPublisher keeps this cluster's ID in the ClusterProperty
// cluster.clusterset.k8s.io, where the ClusterProperty CRD is installed;
// without it, there is nothing to do. An existing value set by someone else
// is not overwritten: the conflict is logged.
func clusterPropertyPublisher(c client.Client, id string) *publisher {
	return &publisher{what: "ClusterProperty " + clusterIDProperty, apply: func(ctx context.Context) error {
		mapping, err := c.RESTMapper().RESTMapping(schema.GroupKind{Group: clusterPropertyGroup, Kind: "ClusterProperty"})
		if meta.IsNoMatchError(err) {
			return nil
		}
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(mapping.GroupVersionKind)
		obj.SetName(clusterIDProperty)
		obj.Object["spec"] = map[string]any{"value": id}
		err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(api.FieldManager))
		if apierrors.IsConflict(err) {
			ctrl.LoggerFrom(ctx).Info("ClusterProperty set by another manager: left as it is", "name", clusterIDProperty, "conflict", err.Error())
			return nil
		}
		if err != nil {
			return fmt.Errorf("apply ClusterProperty %s: %w", clusterIDProperty, err)
		}
		return nil
	}}
}
