package peering

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/manifests"
)

// Disconnect removes, on both clusters, the gateways and PublicKeys of the
// peering and the peer's in-band identity (PeerKubeconfig) and, with wait,
// waits until they are gone. The Configurations stay, so a later Connect
// keeps the same remapped ranges.
func Disconnect(ctx context.Context, local, remote *Cluster, wait bool) error {
	return teardown(ctx, local, remote, teardownOptions{wait: wait})
}

// Reset removes everything of the peering on both clusters: gateways,
// PublicKeys, the in-band identity and Configurations, then the tenant namespaces when nothing
// else is left in them; with wait, it waits until each is gone before the
// next step.
func Reset(ctx context.Context, local, remote *Cluster, wait bool) error {
	return teardown(ctx, local, remote, teardownOptions{all: true, wait: wait})
}

// teardownOptions say what teardown removes: the gateways and keys, or
// everything when all is set; wait waits until each is gone.
type teardownOptions struct {
	all, wait bool
}

// teardown runs Disconnect or Reset.
func teardown(ctx context.Context, local, remote *Cluster, o teardownOptions) error {
	if err := checkTwo(local, remote); err != nil {
		return err
	}
	kinds := networkingKinds(manifests.KindGatewayClient, manifests.KindGatewayServer, manifests.KindPublicKey)
	for _, s := range []struct{ on, peer *Cluster }{{local, remote}, {remote, local}} {
		if err := deletePeerObjects(ctx, s.on, s.peer.Info.ClusterID, "gateways and public keys", kinds, o.wait); err != nil {
			return err
		}
		// Without the tunnel the in-band kubeconfig reaches nothing; its
		// tokens die with the ServiceAccount.
		if err := deletePeerObjects(ctx, s.on, s.peer.Info.ClusterID, "in-band identity", peerAccessKinds, o.wait); err != nil {
			return err
		}
	}
	if !o.all {
		return nil
	}
	for _, s := range []struct{ on, peer *Cluster }{{local, remote}, {remote, local}} {
		if err := deletePeerObjects(ctx, s.on, s.peer.Info.ClusterID, "Configuration", networkingKinds(manifests.KindConfiguration), o.wait); err != nil {
			return err
		}
	}
	for _, s := range []struct{ on, peer *Cluster }{{local, remote}, {remote, local}} {
		if err := deleteTenantNamespace(ctx, s.on, s.peer.Info.ClusterID, o.wait); err != nil {
			return err
		}
	}
	return nil
}

// networkingKinds are kinds of networking.liqo.io.
func networkingKinds(kinds ...string) []schema.GroupVersionKind {
	out := make([]schema.GroupVersionKind, len(kinds))
	for i, k := range kinds {
		out[i] = netv1beta1.GroupVersion.WithKind(k)
	}
	return out
}

// peerAccessKinds are the kinds of a peer's in-band identity (PeerKubeconfig).
var peerAccessKinds = []schema.GroupVersionKind{
	corev1.SchemeGroupVersion.WithKind("ServiceAccount"),
	rbacv1.SchemeGroupVersion.WithKind("Role"),
	rbacv1.SchemeGroupVersion.WithKind("RoleBinding"),
}

// deletePeerObjects deletes the objects of the given kinds labelled for peer
// in its tenant namespace and, with wait, waits until they are gone, so
// nothing is left Terminating.
func deletePeerObjects(ctx context.Context, s *Cluster, peer, what string, kinds []schema.GroupVersionKind, wait bool) error {
	ns := manifests.TenantNamespace(peer)
	sel := client.MatchingLabels{netv1beta1.RemoteClusterIDLabel: peer}
	deleteLeft := func(ctx context.Context) ([]string, error) {
		var left []string
		for _, gvk := range kinds {
			kind := gvk.Kind
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(kind + "List"))
			if err := s.Client.List(ctx, list, client.InNamespace(ns), sel); err != nil {
				return nil, fmt.Errorf("list %s in %s: %w", kind, ns, err)
			}
			for i := range list.Items {
				obj := &list.Items[i]
				left = append(left, kind+" "+obj.Name)
				if obj.DeletionTimestamp != nil {
					continue
				}
				obj.SetGroupVersionKind(gvk)
				if err := s.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
					return nil, fmt.Errorf("delete %s %s/%s: %w", kind, ns, obj.Name, err)
				}
			}
		}
		return left, nil
	}
	left, err := deleteLeft(ctx)
	if err != nil {
		return fmt.Errorf("%s cluster: %w", s.Name, err)
	}
	if len(left) == 0 {
		s.Progress.Infof("No %s of %s left in %s", what, peer, ns)
		return nil
	}
	if !wait {
		s.Progress.Infof("Deletion of the %s of %s requested: %s", what, peer, strings.Join(left, ", "))
		return nil
	}
	if _, err := s.Progress.Wait(ctx, "the "+what+" of "+peer+" to be deleted", func(ctx context.Context) (bool, string, error) {
		left, err := deleteLeft(ctx)
		if err != nil {
			return false, "", err
		}
		return len(left) == 0, "still there: " + strings.Join(left, ", "), nil
	}); err != nil {
		return err
	}
	s.Progress.Infof("Deleted the %s of %s: %s", what, peer, strings.Join(left, ", "))
	return nil
}

// deleteTenantNamespace deletes the tenant namespace of peer when nothing
// but what peerlink put there is left and, with wait, waits until it is
// gone.
func deleteTenantNamespace(ctx context.Context, s *Cluster, peer string, wait bool) error {
	name := manifests.TenantNamespace(peer)
	var ns corev1.Namespace
	if err := s.Client.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			s.Progress.Infof("Namespace %s already gone", name)
			return nil
		}
		return fmt.Errorf("%s cluster: get namespace %s: %w", s.Name, name, err)
	}
	if ns.DeletionTimestamp == nil {
		others, err := foreignObjects(ctx, s, name, peer)
		if err != nil {
			return fmt.Errorf("%s cluster: %w", s.Name, err)
		}
		if len(others) > 0 {
			s.Progress.Infof("Namespace %s kept: it holds objects peerlink did not create: %s", name, strings.Join(others, ", "))
			return nil
		}
		if err := s.Client.Delete(ctx, &ns); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s cluster: delete namespace %s: %w", s.Name, name, err)
		}
	}
	if !wait {
		s.Progress.Infof("Deletion of namespace %s requested", name)
		return nil
	}
	if _, err := s.Progress.Wait(ctx, "namespace "+name+" to be deleted", func(ctx context.Context) (bool, string, error) {
		var ns corev1.Namespace
		err := s.Client.Get(ctx, client.ObjectKey{Name: name}, &ns)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", fmt.Errorf("get namespace %s: %w", name, err)
		}
		return false, namespaceState(&ns), nil
	}); err != nil {
		return err
	}
	s.Progress.Infof("Namespace %s deleted", name)
	return nil
}

// namespaceState tells why a namespace is still Terminating, from the
// conditions the namespace controller sets.
func namespaceState(ns *corev1.Namespace) string {
	var msgs []string
	for _, c := range ns.Status.Conditions {
		if c.Status == corev1.ConditionTrue && c.Message != "" {
			msgs = append(msgs, c.Message)
		}
	}
	if len(msgs) == 0 {
		return string(ns.Status.Phase)
	}
	return strings.Join(msgs, "; ")
}

// foreignObjects lists the objects of a tenant namespace that neither
// peerlink nor Kubernetes put there. Derived objects (owned by another
// object, or labelled for the peer) are being garbage collected; the default
// ServiceAccount, the root CA ConfigMap and Events come with every
// namespace. When the API cannot be listed completely, nothing counts as
// empty: deleting a namespace would delete what could not be seen.
func foreignObjects(ctx context.Context, s *Cluster, ns, peer string) ([]string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(s.Config)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	lists, err := dc.ServerPreferredNamespacedResources()
	if err != nil {
		return nil, fmt.Errorf("discover the namespaced resources to check %s is empty: %w", ns, err)
	}
	var found []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return nil, fmt.Errorf("discovery: %w", err)
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || r.Kind == "Event" {
				continue
			}
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gv.WithKind(r.Kind + "List"))
			if err := s.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
				return nil, fmt.Errorf("list %s in %s: %w", r.Name, ns, err)
			}
			for _, obj := range list.Items {
				if inherent(r.Kind, &obj, peer) {
					continue
				}
				found = append(found, r.Kind+" "+obj.Name)
			}
		}
	}
	slices.Sort(found)
	return found, nil
}

// inherent tells whether an object of a tenant namespace goes away with the
// peering or comes with any namespace.
func inherent(kind string, obj *metav1.PartialObjectMetadata, peer string) bool {
	switch {
	case len(obj.OwnerReferences) > 0, obj.Labels[netv1beta1.RemoteClusterIDLabel] == peer:
		return true
	case kind == "ServiceAccount" && obj.Name == "default",
		kind == "ConfigMap" && obj.Name == "kube-root-ca.crt":
		return true
	}
	return false
}
