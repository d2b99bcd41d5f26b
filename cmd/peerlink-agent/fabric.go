package main

import (
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/peerlink/peerlink/api/ipam/v1alpha1"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/dataplane/fabric"
	"github.com/peerlink/peerlink/internal/field"
)

// fabricFlags are the flags of `peerlink-agent fabric`.
type fabricFlags struct {
	agentFlags
	nodeName, gatewayNamespace string
	cleanupOnExit              bool
}

func newFabricCommand() *cobra.Command {
	var f fabricFlags
	cmd := &cobra.Command{
		Use:   "fabric",
		Short: "Run the fabric of one node, in the node's network namespace",
		Long: `Run the fabric agent on a node (host network): an overlay link towards the
cluster's active gateway pods (Geneve on UDP 6091 where the kernel has it,
VXLAN on UDP 4790 otherwise), routes for every peer's remapped ranges in
peerlink's tables, and the NAT that keeps pod source addresses towards peers
and sends other sources out as the cluster's unknown-source address.

It needs CAP_NET_ADMIN.`,
	}
	return subcommand(cmd, f.addFlags, f.options, func(opts fabric.Options) error { return runFabric(f, opts) })
}

func (f *fabricFlags) addFlags(fs *pflag.FlagSet) {
	f.processFlags.addFlags(fs, ":6092", "0", ", on the host network")
	f.agentFlags.addFlags(fs, agentFlagHelp{
		namespace: "namespace of the ConfigMap " + clusterinfo.Name, namespaceDefault: "peerlink",
		nodeIP:      "address of this node where overlay packets arrive (default: the NODE_IP variable)",
		overlayPeer: "the gateways'",
		mtu:         "MTU of the overlay link; 0: the node link's MTU less the encapsulation",
	})
	fs.StringVar(&f.nodeName, "node-name", os.Getenv("NODE_NAME"), "name of this node (default: the NODE_NAME variable)")
	fs.StringVar(&f.gatewayNamespace, "gateway-namespace", "", "namespace of the gateways and Configurations; empty: all namespaces")
	fs.BoolVar(&f.cleanupOnExit, "cleanup-on-exit", false, "remove the overlay link, routes, rules and nftables table on SIGTERM (for uninstalling; without it they stay for the next agent, so a rollout drops nothing)")
}

func (f *fabricFlags) options() (fabric.Options, error) {
	common, err := f.agentFlags.options()
	if err != nil {
		return fabric.Options{}, err
	}
	o := fabric.Options{
		AgentOptions:     common,
		NodeName:         f.nodeName,
		GatewayNamespace: f.gatewayNamespace,
		CleanupOnExit:    f.cleanupOnExit,
	}
	return o, field.WithFlags(o.Validate(), withAgentFlags(map[string]string{"NodeName": "--node-name"}))
}

// runFabric runs the fabric agent until SIGTERM or SIGINT. Its cache holds
// only gateway pods and the cluster-info ConfigMap, not every pod and
// ConfigMap of the cluster.
func runFabric(f fabricFlags, opts fabric.Options) error {
	mgr, log, err := f.newManager(func(_ *rest.Config, mgrOpts *ctrl.Options) {
		mgrOpts.Cache = cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{fabric.GatewayAppLabel: fabric.GatewayAppValue})},
			&corev1.ConfigMap{}: {
				Namespaces: map[string]cache.Config{opts.Namespace: {}},
				Field:      fields.OneTermEqualSelector("metadata.name", clusterinfo.Name),
			},
			// The IPs of every namespace, even with the gateways of one:
			// the hosts to masquerade towards.
			&ipamv1alpha1.IP{}: {Namespaces: map[string]cache.Config{cache.AllNamespaces: {}}},
		}}
		if opts.GatewayNamespace != "" {
			mgrOpts.Cache.DefaultNamespaces = map[string]cache.Config{opts.GatewayNamespace: {}}
		}
	}, "node", opts.NodeName)
	if err != nil {
		return err
	}
	agent, err := fabric.New(opts, mgr.GetClient(), mgr.GetAPIReader(), mgr.GetCache(), log)
	if err != nil {
		return err
	}
	log.Info("starting fabric agent", "nodeIP", opts.NodeIP)
	return serveAgent(mgr, agent)
}
