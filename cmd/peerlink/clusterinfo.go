package main

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/clusterinfo"
)

// readClusterInfo reads the facts the controller publishes in its
// cluster-info ConfigMap.
func readClusterInfo(ctx context.Context, c client.Reader, namespace string) (clusterinfo.Info, error) {
	info, err := clusterinfo.Read(ctx, c, namespace)
	if errors.Is(err, clusterinfo.ErrNotPublished) {
		return info, fmt.Errorf("%w: is peerlink installed and its controller running? (--peerlink-namespace)", err)
	}
	return info, err
}
