package reconciler

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/mcs"
	"github.com/peerlink/peerlink/reconciler/configuration"
	"github.com/peerlink/peerlink/reconciler/gateway"
	"github.com/peerlink/peerlink/reconciler/ipremap"
	"github.com/peerlink/peerlink/reconciler/services"
)

// SetupAll registers every reconciler of the controller with mgr, and the
// publishers of the cluster-info ConfigMap and the default gateway
// templates, for the cluster described by
// facts. mgr must use a scheme from api.NewScheme. The caller starts mgr.
func SetupAll(mgr ctrl.Manager, facts ClusterFacts) error {
	if err := facts.Validate(); err != nil {
		return fmt.Errorf("local facts: %w", err)
	}
	if err := mgr.Add(clusterInfoPublisher(mgr.GetClient(), facts)); err != nil {
		return fmt.Errorf("add cluster-info publisher: %w", err)
	}
	if err := mgr.Add(defaultTemplatesPublisher(mgr.GetClient(), facts.Namespace, facts.GatewayImage)); err != nil {
		return fmt.Errorf("add default templates publisher: %w", err)
	}
	if err := mgr.Add(clusterPropertyPublisher(mgr.GetClient(), facts.ClusterID)); err != nil {
		return fmt.Errorf("add cluster property publisher: %w", err)
	}
	conf := &configuration.Reconciler{Options: configuration.Options{
		ClusterID:  facts.ClusterID,
		Taken:      facts.Taken(),
		Pools:      facts.Pools,
		RoutedPeer: facts.RoutedPeer,
		PeerPolicy: facts.PeerPolicy(),
	}}
	if err := conf.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up configuration reconciler: %w", err)
	}
	ips := &ipremap.Reconciler{Options: ipremap.Options{ExternalCIDR: facts.ExternalCIDR.Masked(), PodCIDRs: facts.PodCIDRs}}
	if err := ips.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up ip reconciler: %w", err)
	}
	err := gateway.Setup(mgr, gateway.Options{
		ClusterID:   facts.ClusterID,
		Namespace:   facts.Namespace,
		LocalRanges: facts.LocalRanges(),
		// The first address of the external CIDR, as the fabric takes it.
		UnknownSource:        facts.ExternalCIDR.Masked().Addr(),
		AllowedTemplateKinds: facts.AllowedTemplateKinds,
		ServiceLimits:        facts.ServiceLimits,
	})
	if err != nil {
		return err
	}
	err = services.Setup(mgr, services.Options{
		ClusterID:        facts.ClusterID,
		ImportNamespaces: facts.ImportNamespaces,
		Limits:           facts.ServiceLimits,
	})
	if err != nil {
		return fmt.Errorf("set up services reconciler: %w", err)
	}
	return nil
}

// CacheByObject narrows the manager's cache for the controller: of the
// ConfigMaps it watches only the service exchange's, not every ConfigMap of
// the cluster, and those of the sets peers send without their data: the
// services reconciler reads a new version from the API server once and
// keeps it decoded, so the cache need not hold up to a ConfigMap's 1 MiB
// per peer besides.
func CacheByObject() map[client.Object]cache.ByObject {
	exchange, err := labels.NewRequirement(mcs.ExchangeLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key: always valid
	}
	return map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}: {Label: labels.NewSelector().Add(*exchange), Transform: stripImportsData},
	}
}

// stripImportsData drops the data of an imports ConfigMap.
func stripImportsData(obj any) (any, error) {
	if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Labels[mcs.ExchangeLabel] == mcs.ImportsRole {
		cm.BinaryData, cm.Data = nil, nil
	}
	return obj, nil
}
