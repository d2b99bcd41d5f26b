package reconciler

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/internal/rangepolicy"
)

// The cluster-info ConfigMap, which the CLI reads to learn this cluster's ID
// and ranges without access to the controller's flags.
const (
	// ClusterInfoName names the ConfigMap, in the controller's namespace.
	ClusterInfoName = "peerlink-cluster-info"
	// ClusterInfoClusterID is the key of the cluster ID.
	ClusterInfoClusterID = "clusterID"
	// ClusterInfoPodCIDRs is the key of the pod CIDRs, comma-separated.
	ClusterInfoPodCIDRs = "podCIDRs"
	// ClusterInfoServiceCIDR is the key of the service CIDR.
	ClusterInfoServiceCIDR = "serviceCIDR"
	// ClusterInfoExternalCIDR is the key of the external CIDR.
	ClusterInfoExternalCIDR = "externalCIDR"
	// ClusterInfoInternalCIDR is the key of the internal CIDR.
	ClusterInfoInternalCIDR = "internalCIDR"
	// ClusterInfoAllowedPeerCIDRs is the key of the allowlist of peer
	// ranges, comma-separated, so that the CLI refuses what the controller
	// would.
	ClusterInfoAllowedPeerCIDRs = "allowedPeerCIDRs"
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

// ClusterInfoData returns the data of the cluster-info ConfigMap for facts.
func ClusterInfoData(facts ClusterFacts) map[string]string {
	pods := make([]string, len(facts.PodCIDRs))
	for i, p := range facts.PodCIDRs {
		pods[i] = p.String()
	}
	str := func(p netip.Prefix) string {
		if !p.IsValid() {
			return ""
		}
		return p.String()
	}
	return map[string]string{
		ClusterInfoClusterID:    facts.ClusterID,
		ClusterInfoPodCIDRs:     strings.Join(pods, ","),
		ClusterInfoServiceCIDR:  str(facts.ServiceCIDR),
		ClusterInfoExternalCIDR: str(facts.ExternalCIDR),
		ClusterInfoInternalCIDR: str(facts.InternalCIDR),
		// The allowlist in force, the default included, so that a reader
		// needs no knowledge of the default.
		ClusterInfoAllowedPeerCIDRs: rangepolicy.Format(facts.PeerPolicy().AllowedRanges()),
	}
}

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
	cm := corev1ac.ConfigMap(ClusterInfoName, p.facts.Namespace).
		WithLabels(map[string]string{"app.kubernetes.io/part-of": "peerlink"}).
		WithData(ClusterInfoData(p.facts))
	if err := p.client.Apply(ctx, cm, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply configmap %s/%s: %w", p.facts.Namespace, ClusterInfoName, err)
	}
	return nil
}
