package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api"
	"github.com/peerlink/peerlink/internal/kube"
	"github.com/peerlink/peerlink/mcs"
)

// ErrIncomplete says the shards found are not a whole set: a writer is
// changing the number of shards, and the set is read again when it is done.
var ErrIncomplete = errors.New("not every shard is written yet")

// Target is where a set is written.
type Target struct {
	Namespace string
	// Name is the set's name, that of its shard 0 (mcs.ShardName).
	Name string
	// Labels go on every shard and find them again: they must hold
	// mcs.ExchangeLabel.
	Labels map[string]string
	// Annotations go on shard 0.
	Annotations map[string]string
	// Owners go on every shard.
	Owners []metav1.OwnerReference
}

// Count returns the number of shards the set named name in namespace, of
// the exchange role, has now as its shard 0 says: 0 without one, for
// mcs.Sizes.Count.
func Count(ctx context.Context, r client.Reader, namespace, name, role string) (int, error) {
	current, err := list(ctx, r, namespace, role)
	if err != nil {
		return 0, err
	}
	first, ok := current[name]
	if !ok {
		return 0, nil
	}
	_, n, err := mcs.ParseShardPlace(first.Annotations[mcs.ShardAnnotation])
	if err != nil {
		return 0, nil
	}
	return n, nil
}

// Write stores the shards (each an encoded set, in order): it applies
// those that differ from what is stored, then deletes the shards past the
// last, so that a reader finds the former shards or the new ones whole.
func Write(ctx context.Context, c client.Client, t Target, shards [][]byte) error {
	current, err := list(ctx, c, t.Namespace, t.Labels[mcs.ExchangeLabel])
	if err != nil {
		return err
	}
	for i, data := range shards {
		name := mcs.ShardName(t.Name, i)
		annotations := map[string]string{mcs.ShardAnnotation: mcs.ShardPlace(i, len(shards))}
		if i == 0 {
			maps.Copy(annotations, t.Annotations)
		}
		if cm, ok := current[name]; ok && holds(cm, data, t.Labels, annotations) {
			continue
		}
		cm := &corev1.ConfigMap{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: name, Labels: t.Labels,
				Annotations: annotations, OwnerReferences: t.Owners},
			BinaryData: map[string][]byte{mcs.DataKey: data},
		}
		if err := api.Apply(ctx, c, cm, client.FieldOwner(api.FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply configmap %s/%s: %w", t.Namespace, name, err)
		}
	}
	for i := len(shards); i < mcs.MaxShards; i++ {
		cm, ok := current[mcs.ShardName(t.Name, i)]
		if !ok {
			continue
		}
		if err := c.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete configmap %s/%s, a shard no longer used: %w", t.Namespace, cm.Name, err)
		}
	}
	return nil
}

// holds tells whether cm holds data with the labels and annotations.
func holds(cm *corev1.ConfigMap, data []byte, labels, annotations map[string]string) bool {
	return bytes.Equal(cm.BinaryData[mcs.DataKey], data) && kube.HasAll(cm.Labels, labels) && kube.HasAll(cm.Annotations, annotations)
}

// Stored is a set as read.
type Stored struct {
	// Shards are its shards, in order.
	Shards []mcs.Shard
	// Annotations are those of shard 0.
	Annotations map[string]string
	// Version changes whenever a shard does: the shards' names and
	// resourceVersions.
	Version string
}

// Read reads the set named name in namespace, of the given exchange role,
// with r: a NotFound error when it has no shard 0, ErrIncomplete when its
// shards are not a whole set. With a reader that holds the ConfigMaps
// without their data, the shards' Data are empty and Version still says.
func Read(ctx context.Context, r client.Reader, namespace, name, role string) (Stored, error) {
	current, err := list(ctx, r, namespace, role)
	if err != nil {
		return Stored{}, err
	}
	first, ok := current[name]
	if !ok {
		return Stored{}, apierrors.NewNotFound(corev1.Resource("configmaps"), name)
	}
	_, count, err := mcs.ParseShardPlace(first.Annotations[mcs.ShardAnnotation])
	if err != nil {
		return Stored{}, fmt.Errorf("configmap %s/%s: annotation %s: %w", namespace, name, mcs.ShardAnnotation, err)
	}
	out := Stored{Annotations: first.Annotations}
	var version strings.Builder
	for i := range count {
		cm, ok := current[mcs.ShardName(name, i)]
		if !ok {
			return Stored{}, fmt.Errorf("configmap %s/%s: shard %s: %w", namespace, mcs.ShardName(name, i), mcs.ShardPlace(i, count), ErrIncomplete)
		}
		index, n, err := mcs.ParseShardPlace(cm.Annotations[mcs.ShardAnnotation])
		if err != nil || index != i || n != count {
			return Stored{}, fmt.Errorf("configmap %s/%s: shard %s, not %s: %w", namespace, cm.Name,
				cm.Annotations[mcs.ShardAnnotation], mcs.ShardPlace(i, count), ErrIncomplete)
		}
		out.Shards = append(out.Shards, mcs.Shard{Index: i, Count: count, Data: cm.BinaryData[mcs.DataKey]})
		fmt.Fprintf(&version, "%s=%s;", cm.Name, cm.ResourceVersion)
	}
	out.Version = version.String()
	return out, nil
}

// list returns the ConfigMaps of the exchange role in namespace, by name,
// to be read only: from a cache, they are the cache's own.
func list(ctx context.Context, r client.Reader, namespace, role string) (map[string]*corev1.ConfigMap, error) {
	var cms corev1.ConfigMapList
	if err := r.List(ctx, &cms, client.InNamespace(namespace), client.MatchingLabels{mcs.ExchangeLabel: role}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list the %s configmaps of %s: %w", role, namespace, err)
	}
	out := make(map[string]*corev1.ConfigMap, len(cms.Items))
	for i := range cms.Items {
		out[cms.Items[i].Name] = &cms.Items[i]
	}
	return out, nil
}
