package reconciler

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api"
	"github.com/peerlink/peerlink/clusterinfo"
)

const (
	// clusterInfoResync is how often the ConfigMap is applied again, so that
	// one deleted or edited by hand comes back without a ConfigMap watch
	// (which would cache every ConfigMap of the cluster). Applying unchanged
	// data writes nothing.
	clusterInfoResync = 5 * time.Minute
	// clusterInfoRetry is the pause after a failed apply.
	clusterInfoRetry = 5 * time.Second
)

// clusterInfoPublisher keeps the cluster-info ConfigMap in line with the
// facts. It runs on the leader only, as a manager Runnable.
type clusterInfoPublisher struct {
	client client.Client
	facts  ClusterFacts
}

// Start applies the ConfigMap, then again every clusterInfoResync (sooner
// after a failure), until ctx ends.
func (p *clusterInfoPublisher) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("cluster-info")
	for {
		wait := clusterInfoResync
		if err := p.apply(ctx); err != nil {
			log.Error(err, "publish cluster info")
			wait = clusterInfoRetry
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// apply server-side applies the ConfigMap.
func (p *clusterInfoPublisher) apply(ctx context.Context) error {
	cm := p.facts.Info.ApplyConfiguration(p.facts.Namespace)
	if err := p.client.Apply(ctx, cm, client.FieldOwner(api.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply configmap %s/%s: %w", p.facts.Namespace, clusterinfo.Name, err)
	}
	return nil
}
