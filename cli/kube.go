package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/peering"
)

// cluster selects one cluster: the local one by kubectl's flags, the
// remote one of network and rotate-key by --remote-kubeconfig and
// --remote-context.
type cluster struct {
	flags *genericclioptions.ConfigFlags
	// kubeconfigFlag names the flag in errors: --kubeconfig or --remote-kubeconfig.
	kubeconfigFlag string
}

// addRemoteCluster adds --remote-kubeconfig and --remote-context, with the
// usage given, and returns the cluster they select. kubectl's other flags
// (--as, --token, --server...) apply to the local cluster only.
func addRemoteCluster(flags *pflag.FlagSet, kubeconfigUsage, contextUsage string) cluster {
	c := cluster{flags: &genericclioptions.ConfigFlags{KubeConfig: ptr.To(""), Context: ptr.To("")}, kubeconfigFlag: "--remote-kubeconfig"}
	flags.StringVar(c.flags.KubeConfig, "remote-kubeconfig", "", kubeconfigUsage)
	flags.StringVar(c.flags.Context, "remote-context", "", contextUsage)
	return c
}

// given tells whether a kubeconfig or a context was named.
func (c cluster) given() bool {
	return *c.flags.KubeConfig != "" || *c.flags.Context != ""
}

// restConfig loads the kubeconfig as kubectl does: the explicit file, else
// $KUBECONFIG, else ~/.kube/config, with the overrides of the flags.
func (c cluster) restConfig() (*rest.Config, error) {
	cfg, err := c.flags.ToRESTConfig()
	if err != nil {
		if path := *c.flags.KubeConfig; path != "" {
			return nil, fmt.Errorf("%s %s: %w", c.kubeconfigFlag, path, err)
		}
		return nil, fmt.Errorf("load kubeconfig (set %s or KUBECONFIG): %w", c.kubeconfigFlag, err)
	}
	// Without a kubeconfig, a server flag or a pod's service account,
	// kubectl falls back to localhost:8080; saying what is missing, as
	// client-go does without that fallback, helps more.
	raw, err := c.flags.ToRawKubeConfigLoader().RawConfig()
	if err == nil && clientcmdapi.IsConfigEmpty(&raw) && cfg.Host == clientcmd.ClusterDefaults.Server && os.Getenv("KUBERNETES_MASTER") == "" {
		return nil, fmt.Errorf("load kubeconfig (set %s or KUBECONFIG): invalid configuration: %w", c.kubeconfigFlag, clientcmd.ErrEmptyConfig)
	}
	return cfg, nil
}

// client builds a client of the selected cluster. It does not contact the
// API server.
func (c cluster) client() (client.Client, error) {
	cfg, err := c.restConfig()
	if err != nil {
		return nil, err
	}
	return peering.NewClient(cfg)
}

// openSides opens the local cluster and, when remote names one, the remote
// cluster; remote is nil otherwise.
func (g *globalOptions) openSides(ctx context.Context, remote cluster, p peering.Progress) (local, other *peering.Cluster, err error) {
	if local, err = g.open(ctx, "local", g.local(), p); err != nil {
		return nil, nil, err
	}
	if remote.given() {
		if other, err = g.open(ctx, "remote", remote, p); err != nil {
			return nil, nil, err
		}
	}
	return local, other, nil
}

// open connects to the cluster c selects and reads the facts it publishes,
// warning when its controller runs another version; name is "local" or
// "remote".
func (g *globalOptions) open(ctx context.Context, name string, c cluster, p peering.Progress) (*peering.Cluster, error) {
	cfg, err := c.restConfig()
	if err != nil {
		return nil, err
	}
	s, err := peering.Open(ctx, name, cfg, g.PeerlinkNamespace, p)
	if err != nil {
		return nil, err
	}
	g.warnSkew(s.Info.ControllerVersion, name)
	return s, nil
}
