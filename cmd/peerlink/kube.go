package main

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/peering"
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
	return peering.NewClient(cfg)
}
