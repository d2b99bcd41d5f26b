package peering

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/manifests"
)

// Cluster is one cluster of a peering.
type Cluster struct {
	// Name is "local" or "remote", for progress lines and errors.
	Name   string
	Config *rest.Config
	Client client.Client
	// Info is what the cluster publishes about itself.
	Info     clusterinfo.Info
	Progress Progress
}

// Open connects to a cluster and reads the facts it publishes in the
// cluster-info ConfigMap of peerlinkNamespace.
func Open(ctx context.Context, name string, cfg *rest.Config, peerlinkNamespace string, p Progress) (*Cluster, error) {
	c, err := NewClient(cfg)
	if err != nil {
		return nil, err
	}
	info, err := ReadClusterInfo(ctx, c, peerlinkNamespace)
	if err != nil {
		return nil, fmt.Errorf("%s cluster: %w", name, err)
	}
	return &Cluster{Name: name, Config: cfg, Client: c, Info: info, Progress: p.With(name)}, nil
}

// ErrNotInstalled says what to check when a cluster publishes no facts;
// a caller names its setting of the namespace beside it.
var ErrNotInstalled = errors.New("is peerlink installed and its controller running?")

// ReadClusterInfo reads the facts the controller publishes, saying what to
// check when they are missing (ErrNotInstalled).
func ReadClusterInfo(ctx context.Context, c client.Reader, namespace string) (clusterinfo.Info, error) {
	info, err := clusterinfo.Read(ctx, c, namespace)
	if errors.Is(err, clusterinfo.ErrNotPublished) {
		return info, fmt.Errorf("%w: %w", err, ErrNotInstalled)
	}
	return info, err
}

// NewClient builds a client with the scheme of the peerlink kinds. It does
// not contact the API server.
func NewClient(cfg *rest.Config) (client.Client, error) {
	s, err := api.NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Host, err)
	}
	return c, nil
}

// Apply server-side applies the manifest of obj under the CLI's field
// manager. The manifest holds only the fields the CLI sets, so applying
// again after a user change to another field keeps that change.
func Apply(ctx context.Context, c client.Client, obj runtime.Object) error {
	m, err := manifests.Manifest(obj)
	if err != nil {
		return err
	}
	return ApplyUnstructured(ctx, c, &unstructured.Unstructured{Object: m})
}

// ApplyUnstructured server-side applies u as it is, under the CLI's field
// manager; u is not changed.
func ApplyUnstructured(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	ref := u.GetKind() + " " + manifests.ObjectRef(u.GetNamespace(), u.GetName())
	// No ForceOwnership: a field Argo CD, Flux or kubectl manages is theirs
	// to change (from Git), not the CLI's to take; the conflict is reported,
	// naming the manager. A copy: the client writes the answer into what
	// it applies.
	err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), client.FieldOwner(api.CLIFieldManager))
	if apierrors.IsConflict(err) {
		return fmt.Errorf("apply %s: %w (another manager owns these fields: change them where it takes them from, or let it release them first)", ref, err)
	}
	if err != nil {
		return fmt.Errorf("apply %s: %w", ref, err)
	}
	return nil
}

// EnsureNamespace applies a namespace when it does not exist yet; an
// existing one is left alone, whoever manages it.
func EnsureNamespace(ctx context.Context, c client.Client, name string) error {
	var ns corev1.Namespace
	err := c.Get(ctx, client.ObjectKey{Name: name}, &ns)
	if err == nil {
		if ns.DeletionTimestamp != nil {
			return fmt.Errorf("namespace %s is being deleted: wait until it is gone and run again", name)
		}
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get namespace %s: %w", name, err)
	}
	return Apply(ctx, c, manifests.Namespace(name))
}

// applyInTenant applies obj on the cluster, creating its namespace first.
func (s *Cluster) applyInTenant(ctx context.Context, obj client.Object) error {
	if err := EnsureNamespace(ctx, s.Client, obj.GetNamespace()); err != nil {
		return fmt.Errorf("%s cluster: %w", s.Name, err)
	}
	if err := Apply(ctx, s.Client, obj); err != nil {
		return fmt.Errorf("%s cluster: %w", s.Name, err)
	}
	return nil
}

// Create applies obj, in its namespace created when missing, and with wait
// waits until it is Ready for its current generation.
func Create(ctx context.Context, c client.Client, p Progress, obj client.Object, wait bool) error {
	if err := EnsureNamespace(ctx, c, obj.GetNamespace()); err != nil {
		return err
	}
	if err := Apply(ctx, c, obj); err != nil {
		return err
	}
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	ref := kind + " " + manifests.ObjectRef(obj.GetNamespace(), obj.GetName())
	p.Infof("%s applied", ref)
	if !wait {
		return nil
	}
	if kind == manifests.KindPublicKey {
		p.Infof("%s has no status to wait for: the gateway agent reads it", ref)
		return nil
	}
	state, err := p.Wait(ctx, ref+" to be Ready", func(ctx context.Context) (bool, string, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), u); err != nil {
			return false, "", fmt.Errorf("get %s: %w", ref, err)
		}
		done, state := ReadyState(u)
		return done, state, nil
	})
	if err != nil {
		return err
	}
	p.Infof("%s is ready: %s", ref, state)
	return nil
}
