package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api"
	"github.com/peerlink/peerlink/generators"
)

// clusterFlags select one cluster from a kubeconfig.
type clusterFlags struct {
	kubeconfig, context string
	// kubeconfigFlag names the flag in errors: --kubeconfig or --remote-kubeconfig.
	kubeconfigFlag string
}

// restConfig loads the kubeconfig as kubectl does: the explicit file, else
// $KUBECONFIG, else ~/.kube/config, with the context override.
func (f clusterFlags) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: f.context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		if f.kubeconfig != "" {
			return nil, fmt.Errorf("%s %s: %w", f.kubeconfigFlag, f.kubeconfig, err)
		}
		return nil, fmt.Errorf("load kubeconfig (set %s or KUBECONFIG): %w", f.kubeconfigFlag, err)
	}
	return cfg, nil
}

// client builds a client of the selected cluster. It does not contact the
// API server.
func (f clusterFlags) client() (client.Client, error) {
	cfg, err := f.restConfig()
	if err != nil {
		return nil, err
	}
	return newClient(cfg)
}

// newClient builds a client with the scheme of the CLI.
func newClient(cfg *rest.Config) (client.Client, error) {
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

// apply server-side applies the manifest of obj as the peerlink field
// manager. The manifest holds only the fields the CLI sets, so applying
// again after a user change to another field keeps that change.
func apply(ctx context.Context, c client.Client, obj runtime.Object) error {
	m, err := generators.Manifest(obj)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: m}
	// No ForceOwnership: a field Argo CD, Flux or kubectl manages is theirs
	// to change (from Git), not the CLI's to take; the conflict is reported,
	// naming the manager.
	err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(api.CLIFieldManager))
	if apierrors.IsConflict(err) {
		return fmt.Errorf("apply %s %s: %w (another manager owns these fields: change them where it takes them from, or let it release them first)",
			u.GetKind(), objectRef(u.GetNamespace(), u.GetName()), err)
	}
	if err != nil {
		return fmt.Errorf("apply %s %s: %w", u.GetKind(), objectRef(u.GetNamespace(), u.GetName()), err)
	}
	return nil
}

// ensureNamespace applies a namespace when it does not exist yet; an
// existing one is left alone, whoever manages it.
func ensureNamespace(ctx context.Context, c client.Client, name string) error {
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
	return apply(ctx, c, generators.Namespace(name))
}

func objectRef(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
