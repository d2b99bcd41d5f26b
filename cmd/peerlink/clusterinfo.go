package main

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/generators"
	"github.com/peerlink/peerlink/reconciler"
)

// readClusterInfo reads the facts the controller publishes in its
// cluster-info ConfigMap.
func readClusterInfo(ctx context.Context, c client.Client, namespace string) (generators.ClusterInfo, error) {
	var cm corev1.ConfigMap
	key := client.ObjectKey{Namespace: namespace, Name: reconciler.ClusterInfoName}
	if err := c.Get(ctx, key, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return generators.ClusterInfo{}, fmt.Errorf("configmap %s not found: is peerlink installed and its controller running? (--peerlink-namespace)", key)
		}
		return generators.ClusterInfo{}, fmt.Errorf("get configmap %s: %w", key, err)
	}
	info, err := parseClusterInfo(cm.Data)
	if err != nil {
		return generators.ClusterInfo{}, fmt.Errorf("configmap %s: %w", key, err)
	}
	return info, nil
}

// parseClusterInfo reads the data of the cluster-info ConfigMap. Errors name
// the key.
func parseClusterInfo(data map[string]string) (generators.ClusterInfo, error) {
	var info generators.ClusterInfo
	info.ClusterID = strings.TrimSpace(data[reconciler.ClusterInfoClusterID])
	if err := generators.ValidateClusterID(info.ClusterID); err != nil {
		return generators.ClusterInfo{}, fmt.Errorf("data.%s: %w", reconciler.ClusterInfoClusterID, err)
	}
	pods, err := generators.ParseCIDRList(data[reconciler.ClusterInfoPodCIDRs])
	if err != nil {
		return generators.ClusterInfo{}, fmt.Errorf("data.%s: %w", reconciler.ClusterInfoPodCIDRs, err)
	}
	if len(pods) == 0 {
		return generators.ClusterInfo{}, fmt.Errorf("data.%s: no pod CIDR", reconciler.ClusterInfoPodCIDRs)
	}
	info.PodCIDRs = pods
	for _, f := range []struct {
		key string
		dst *netip.Prefix
	}{
		{reconciler.ClusterInfoServiceCIDR, &info.ServiceCIDR},
		{reconciler.ClusterInfoExternalCIDR, &info.ExternalCIDR},
		{reconciler.ClusterInfoInternalCIDR, &info.InternalCIDR},
	} {
		v := strings.TrimSpace(data[f.key])
		if v == "" {
			continue
		}
		p, err := generators.ParseCIDR(v)
		if err != nil {
			return generators.ClusterInfo{}, fmt.Errorf("data.%s: %w", f.key, err)
		}
		*f.dst = p
	}
	return info, nil
}
