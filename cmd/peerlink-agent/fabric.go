package main

import (
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/dataplane/fabric"
	"github.com/peerlink/peerlink/dataplane/overlay"
)

// fabricFlags are the flags of `peerlink-agent fabric`.
type fabricFlags struct {
	processFlags
	nodeName, nodeIP            string
	namespace, gatewayNamespace string
	overlayKind                 string
	mtu                         int
	resync                      time.Duration
	cleanupOnExit               bool
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
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := f.options()
			if err != nil {
				return err
			}
			return runFabric(f, opts)
		},
	}
	f.addFlags(cmd.Flags())
	return cmd
}

func (f *fabricFlags) addFlags(fs *pflag.FlagSet) {
	f.processFlags.addFlags(fs, ":6092", "0", ", on the host network")
	fs.StringVar(&f.nodeName, "node-name", os.Getenv("NODE_NAME"), "name of this node (default: the NODE_NAME variable)")
	fs.StringVar(&f.nodeIP, "node-ip", os.Getenv("NODE_IP"), "address of this node where overlay packets arrive (default: the NODE_IP variable)")
	fs.StringVar(&f.namespace, "namespace", "peerlink", "namespace of the ConfigMap "+clusterinfo.Name)
	fs.StringVar(&f.gatewayNamespace, "gateway-namespace", "", "namespace of the gateways and Configurations; empty: all namespaces")
	fs.StringVar(&f.overlayKind, "overlay", string(overlay.Auto), "overlay encapsulation, as the gateways': auto (geneve if the kernel has it, else vxlan), geneve or vxlan")
	fs.IntVar(&f.mtu, "mtu", 0, "MTU of the overlay link; 0: the node link's MTU less the encapsulation")
	fs.DurationVar(&f.resync, "resync-interval", time.Second, "how often the kernel state is checked against the plan")
	fs.BoolVar(&f.cleanupOnExit, "cleanup-on-exit", false, "remove the overlay link, routes, rules and nftables table on SIGTERM (for uninstalling; without it they stay for the next agent, so a rollout drops nothing)")
}

func (f *fabricFlags) options() (fabric.Options, error) {
	kind, err := overlay.ParseKind(f.overlayKind)
	if err != nil {
		return fabric.Options{}, fmt.Errorf("--overlay: %w", err)
	}
	o := fabric.Options{
		NodeName:         f.nodeName,
		Namespace:        f.namespace,
		GatewayNamespace: f.gatewayNamespace,
		Overlay:          kind,
		MTU:              f.mtu,
		ResyncInterval:   f.resync,
		CleanupOnExit:    f.cleanupOnExit,
	}
	if f.nodeIP != "" {
		if o.NodeIP, err = netip.ParseAddr(f.nodeIP); err != nil {
			return fabric.Options{}, fmt.Errorf("--node-ip %q: %w", f.nodeIP, err)
		}
	}
	return o, o.Validate()
}

// runFabric runs the fabric agent until SIGTERM or SIGINT. Its cache holds
// only gateway pods and the cluster-info ConfigMap, not every pod and
// ConfigMap of the cluster.
func runFabric(f fabricFlags, opts fabric.Options) error {
	log, cfg, scheme, err := f.setUp("node", opts.NodeName)
	if err != nil {
		return err
	}
	cacheOpts := cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{fabric.GatewayAppLabel: fabric.GatewayAppValue})},
		&corev1.ConfigMap{}: {
			Namespaces: map[string]cache.Config{opts.Namespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", clusterinfo.Name),
		},
	}}
	if opts.GatewayNamespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{opts.GatewayNamespace: {}}
	}
	mgrOpts := f.managerOptions(scheme)
	mgrOpts.Cache = cacheOpts
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	agent, err := fabric.New(opts, mgr.GetClient(), mgr.GetCache(), log)
	if err != nil {
		return err
	}
	log.Info("starting fabric agent", "nodeIP", opts.NodeIP)
	return serveAgent(mgr, agent)
}
