package cli

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api/gatewayrole"
	"github.com/peerlink/peerlink/internal/field"
	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/peering"
)

func newGenerateCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Print the manifests this cluster hands to a peer",
		Long: `Print, from what this cluster publishes, the manifests a peer applies: this
cluster's Configuration and the PublicKey of one of its gateways. They are
named and labelled with this cluster's ID and placed in
liqo-tenant-<this cluster's id>, the peer's tenant namespace for us, whose
Namespace comes first: kubectl apply -f of the output creates it on the peer.`,
		Example: `  peerlink generate configuration > my-configuration.yaml
  peerlink generate publickey --gateway-type server --gateway-name cluster-a > my-publickey.yaml`,
	}
	cmd.AddCommand(newGenerateConfigurationCmd(g), newGeneratePublicKeyCmd(g), newGenerateKubeconfigCmd(g))
	return cmd
}

func newGenerateConfigurationCmd(g *globalOptions) *cobra.Command {
	var out outputFlag
	var remoteNS string
	cmd := &cobra.Command{
		Use:   "configuration",
		Short: "Print this cluster's Configuration, to be applied on the peer",
		Example: `  # On cluster A: what cluster B must apply to know A's network
  peerlink generate configuration --kubeconfig a.kubeconfig > a-configuration.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := out.check(); err != nil {
				return err
			}
			cl, err := g.localClient(cmd.Context())
			if err != nil {
				return err
			}
			info, err := peering.ReadClusterInfo(cmd.Context(), cl, g.PeerlinkNamespace)
			if err != nil {
				return err
			}
			conf, err := manifests.ConfigurationForPeer(info, remoteNS)
			if err != nil {
				return err
			}
			return out.print(cmd, manifests.Namespace(conf.Namespace), conf)
		},
	}
	out.add(cmd, string(manifests.FormatYAML))
	addRemoteNamespaceFlag(cmd, &remoteNS)
	return cmd
}

func addRemoteNamespaceFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVar(dst, "remote-namespace", "", "namespace of the printed object on the peer (default: liqo-tenant-<this cluster's id>)")
}

func newGeneratePublicKeyCmd(g *globalOptions) *cobra.Command {
	var out outputFlag
	var remoteNS, gwType, gwName string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "publickey",
		Short: "Print the PublicKey of one of this cluster's gateways, to be applied on the peer",
		Long: `Print the PublicKey of a gateway of this cluster, read from the gateway's
status (status.publicKey), where the controller publishes the public half of
the key pair it keeps in the gateway's key Secret. The command reads no Secret:
reading gateways is all it needs, and the private key never leaves the cluster.

The gateway is looked up in -n; without it, the gateway of that name in any
namespace, else in liqo-tenant-<gateway name> (the CLI names gateways after
the peer). A gateway just created has no key yet: the
command waits for it up to --timeout, saying so on stderr.`,
		Example: `  # On cluster B, the server side of the peering with cluster-a
  peerlink generate publickey --gateway-type server --gateway-name cluster-a > b-publickey.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := out.check(); err != nil {
				return err
			}
			role, err := gatewayrole.Parse(gwType)
			if err != nil {
				return fmt.Errorf("--gateway-type: %w", err)
			}
			if err := manifests.ValidateObjectName(gwName); err != nil {
				return fmt.Errorf("--gateway-name: %w", err)
			}
			ctx := cmd.Context()
			cl, err := g.localClient(ctx)
			if err != nil {
				return err
			}
			gw := client.ObjectKey{Namespace: g.namespace(), Name: gwName}
			if gw.Namespace == "" {
				if gw, err = peering.FindGateway(ctx, cl, role, gwName); err != nil {
					return fmt.Errorf("%w with -n", err)
				}
			}
			info, err := peering.ReadClusterInfo(ctx, cl, g.PeerlinkNamespace)
			if err != nil {
				return err
			}
			pk, err := peering.PublicKeyForPeer(ctx, cl, progress(cmd.ErrOrStderr(), timeout), info.ClusterID, role, gw, remoteNS)
			if err != nil {
				return err
			}
			return out.print(cmd, manifests.Namespace(pk.Namespace), pk)
		},
	}
	out.add(cmd, string(manifests.FormatYAML))
	addRemoteNamespaceFlag(cmd, &remoteNS)
	cmd.Flags().StringVar(&gwType, "gateway-type", "", "role of the gateway: server or client (required)")
	cmd.Flags().StringVar(&gwName, "gateway-name", "", "name of the GatewayServer or GatewayClient (required)")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultTimeout, "how long to wait for the controller to generate the gateway's key")
	_ = cmd.MarkFlagRequired("gateway-type")
	_ = cmd.MarkFlagRequired("gateway-name")
	_ = cmd.RegisterFlagCompletionFunc("gateway-type", cobra.FixedCompletions([]string{string(gatewayrole.Server), string(gatewayrole.Client)}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func newGenerateKubeconfigCmd(g *globalOptions) *cobra.Command {
	var peer, address string
	var duration, timeout time.Duration
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print a kubeconfig for a peer, reaching this cluster's API server through the tunnel",
		Long: `Remap this cluster's API server into its external CIDR (the IP object
peerlink-api-server in --peerlink-namespace, created when missing), so that
the peer reaches it through the tunnel only, and print a kubeconfig for the
peer: a token, valid for --duration, of the ServiceAccount peerlink-peer in
liqo-tenant-<peer id>, which may read the peering's objects there and write
PublicKeys, nothing else. Progress goes to stderr.

The kubeconfig's server is --address, the API server as the peer reaches it:
the remapped address under the peer's view of this cluster's external CIDR
(the peer's Configuration of this cluster, status.remote.cidr.external). By
default it is the remapped address itself, right when the peer keeps this
cluster's external CIDR as it is.`,
		Example: `  # On cluster A, for cluster B, which sees A's external CIDR as 10.73.0.0/16
  peerlink generate kubeconfig --remote-cluster-id cluster-b --address 10.73.0.1:6443 > a-for-b.kubeconfig`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var server netip.AddrPort
			if address != "" {
				var err error
				if server, err = netip.ParseAddrPort(address); err != nil {
					return fmt.Errorf("--address: %w", err)
				}
			}
			if err := manifests.ValidateObjectName(peer); err != nil {
				return fmt.Errorf("--remote-cluster-id: %w", err)
			}
			flags := map[string]string{"Peer": "--remote-cluster-id", "Server": "--address", "Duration": "--duration"}
			if err := peering.CheckTokenDuration(duration); err != nil {
				return field.WithFlags(err, flags)
			}
			ctx := cmd.Context()
			s, err := g.open(ctx, "local", g.local(), progress(cmd.ErrOrStderr(), timeout))
			if err != nil {
				return err
			}
			exposed, err := peering.ExposeAPIServer(ctx, s, g.PeerlinkNamespace)
			if err != nil {
				return err
			}
			if !server.IsValid() {
				server = netip.AddrPortFrom(exposed.Remapped, exposed.Local.Port())
				s.Progress.Infof("No --address: the kubeconfig names %s, right when %s keeps this cluster's external CIDR as it is", server, peer)
			}
			kc, _, err := peering.PeerKubeconfig(ctx, s, peering.PeerKubeconfigOptions{Peer: peer, Server: server, Duration: duration})
			if err != nil {
				return field.WithFlags(err, flags)
			}
			_, err = cmd.OutOrStdout().Write(kc)
			return err
		},
	}
	cmd.Flags().StringVar(&peer, "remote-cluster-id", "", "cluster ID of the peer the kubeconfig is for (required)")
	cmd.Flags().StringVar(&address, "address", "", "this cluster's API server as the peer reaches it through the tunnel, ADDRESS:PORT (default: the remapped address, on the API server's port)")
	cmd.Flags().DurationVar(&duration, "duration", defaultTokenDuration, "how long the token is valid (the API server may shorten it)")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultTimeout, "how long to wait for the API server's remapped address")
	_ = cmd.MarkFlagRequired("remote-cluster-id")
	return cmd
}
