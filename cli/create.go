package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/internal/field"
	"github.com/peerlink/peerlink/internal/rangepolicy"
	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/peerbundle"
	"github.com/peerlink/peerlink/peering"
)

func newCreateCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a peering object, or print its manifest with -o",
		Long: `Create a Configuration, GatewayServer, GatewayClient or PublicKey for a peer.

With -o yaml|json the manifest is printed and nothing else happens: no cluster
is needed. Without -o the object is applied to the cluster (server-side apply,
field manager peerlink), creating its namespace when needed; --wait then waits
until the controller reports it Ready.

Objects are named after the peer (--remote-cluster-id) unless NAME is given, and
go to the namespace liqo-tenant-<remote cluster id> unless -n is given.`,
		Example: `  # Print a GatewayServer for peer cluster-a, to review or commit
  peerlink create gatewayserver --remote-cluster-id cluster-a --service-type NodePort -o yaml

  # Apply a Configuration for peer cluster-b and wait until it is Ready
  peerlink create configuration --remote-cluster-id cluster-b --pod-cidr 10.244.0.0/16 --wait`,
	}
	cmd.AddCommand(
		newCreateConfigurationCmd(g),
		newCreateGatewayCmd(g, gatewayrole.Server),
		newCreateGatewayCmd(g, gatewayrole.Client),
		newCreatePublicKeyCmd(g),
	)
	return cmd
}

// peerOf checks the peer's cluster ID, given by flag, and the namespace of
// -n, and returns where the objects for that peer go.
func peerOf(flag, id, namespace, name string) (manifests.Peer, error) {
	if err := clusterinfo.ValidateClusterID(id); err != nil {
		return manifests.Peer{}, fmt.Errorf("%s: %w", flag, err)
	}
	if namespace != "" {
		if err := manifests.ValidateNamespace(namespace); err != nil {
			return manifests.Peer{}, fmt.Errorf("--namespace: %w", err)
		}
	}
	return manifests.Peer{RemoteClusterID: id, Namespace: namespace, Name: name}, nil
}

// createCommand completes cmd, a create subcommand taking an optional NAME,
// with the flags every create subcommand has: it builds its object for the
// peer with build, then prints it with -o, or applies it and, with --wait,
// waits until it is Ready.
func createCommand(g *globalOptions, cmd *cobra.Command, build func(manifests.Peer) (client.Object, error)) *cobra.Command {
	var remoteClusterID string
	var out outputFlag
	var wait bool
	var timeout time.Duration
	cmd.Args = cobra.MaximumNArgs(1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		p, err := peerOf("--remote-cluster-id", remoteClusterID, g.namespace(), strings.Join(args, ""))
		if err != nil {
			return err
		}
		obj, err := build(p)
		if err != nil {
			return err
		}
		if out.format != "" {
			return out.print(cmd, obj)
		}
		cl, err := g.localClient(cmd.Context())
		if err != nil {
			return err
		}
		return peering.Create(cmd.Context(), cl, progress(cmd.OutOrStdout(), timeout), obj, wait)
	}
	cmd.Flags().StringVar(&remoteClusterID, "remote-cluster-id", "", "ID of the peer cluster the object is for (required)")
	_ = cmd.MarkFlagRequired("remote-cluster-id")
	out.add(cmd, "")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the object is Ready (without -o)")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultTimeout, "how long --wait waits")
	return cmd
}

func newCreateConfigurationCmd(g *globalOptions) *cobra.Command {
	var pod, external, placements []string
	var factFlags peerFactFlags
	cmd := createCommand(g, &cobra.Command{
		Use:   "configuration [NAME]",
		Short: "Declare the network of a peer cluster",
		Long: `Create the Configuration that declares the network of a peer cluster: its
pod CIDRs and external CIDRs, as the peer has them.

Each range, IPv4 or IPv6, is held to the rules the controller applies: never
a special-use range, at most 64 per list, inside the allowlist (by default
the private IPv4 ranges and the IPv6 unique local addresses fc00::/7). A
dual-stack peer lists a range of each family; the controller remaps each
within its own family.

` + peerFactsHelp + `

Create reports the peer's ranges as bundle add does, also without a plan
(every range is then remapped), on standard error: -o keeps standard output
to the manifest.`,
		Example: `  # Print the Configuration of peer cluster-b, to commit or apply elsewhere
  peerlink create configuration --remote-cluster-id cluster-b \
    --pod-cidr 10.244.0.0/16 --external-cidr 10.70.0.0/16 -o yaml

  # The same, held to this cluster's allowlist and address plan for peers
  peerlink info -o yaml > cluster-a.yaml
  peerlink create configuration --remote-cluster-id cluster-b \
    --pod-cidr 10.244.0.0/16 --cluster-info cluster-a.yaml -o yaml

  # A dual-stack peer: one range of each family
  peerlink create configuration --remote-cluster-id cluster-b \
    --pod-cidr 10.244.0.0/16,fd44:2::/48 --external-cidr 10.70.0.0/16 -o yaml

  # Apply it and wait until the controller has mapped the peer's CIDRs
  peerlink create configuration --remote-cluster-id cluster-b --pod-cidr 10.244.0.0/16 --wait`,
	}, func(p manifests.Peer) (client.Object, error) {
		facts, allowedFrom, err := factFlags.load()
		if err != nil {
			return nil, err
		}
		conf, pl, err := peerbundle.PeerConfiguration(p, pod, external, facts.Policy)
		err = field.WithFlags(err, map[string]string{"PodCIDRs": "--pod-cidr", "ExternalCIDRs": "--external-cidr"})
		if _, refused := errors.AsType[*rangepolicy.Refusal](err); refused {
			return nil, fmt.Errorf("%w (%s)", err, allowedFrom)
		}
		if err != nil {
			return nil, manifests.WithNames(err, map[string]string{"metadata.name": "NAME", manifests.RemoteClusterIDPath().String(): "--remote-cluster-id",
				"spec.remote.cidr.pod": "--pod-cidr", "spec.remote.cidr.external": "--external-cidr"})
		}
		placements = pl
		return conf, nil
	})
	// The placements follow what was printed or applied: a command that
	// fails says only why.
	create := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := create(cmd, args); err != nil {
			return err
		}
		for _, pl := range placements {
			if _, err := fmt.Fprintf(cmd.ErrOrStderr(), "INFO   peer range %s\n", pl); err != nil {
				return err
			}
		}
		return nil
	}
	cmd.Flags().StringArrayVar(&pod, "pod-cidr", nil, "pod CIDR of the peer (repeatable, or a comma-separated list)")
	cmd.Flags().StringArrayVar(&external, "external-cidr", nil, "external CIDR of the peer (repeatable, or a comma-separated list)")
	factFlags.register(cmd)
	return cmd
}

// newCreateGatewayCmd makes create gatewayserver, or gatewayclient: the
// two differ only in their help and in the flags of their role.
func newCreateGatewayCmd(g *globalOptions, role gatewayrole.Role) *cobra.Command {
	f := gatewayFlags{portNeeded: "the server's port is needed"}
	cmd := &cobra.Command{
		Use:     "gatewayserver [NAME]",
		Aliases: []string{"gws", "gwserver"},
		Short:   "Create the server side of the tunnel to a peer",
		Example: `  # A server exposed on a fixed node port, printed for review
  peerlink create gatewayserver --remote-cluster-id cluster-a \
    --service-type NodePort --node-port 30851 -o yaml

  # Apply a LoadBalancer server and wait until it publishes its endpoint
  peerlink create gatewayserver --remote-cluster-id cluster-a --wait`,
	}
	if role == gatewayrole.Client {
		cmd = &cobra.Command{
			Use:     "gatewayclient [NAME]",
			Aliases: []string{"gwc", "gwclient"},
			Short:   "Create the client side of the tunnel to a peer",
			Long: `Create the client side of the tunnel to a peer.

--addresses and --port are where the peer's GatewayServer is reachable (its
status.endpoint). Without --addresses the client is a placeholder: the
controller creates its keys and reports WaitingForEndpoint until the endpoint
is filled in.`,
			Example: `  # A client of the server the peer published at 172.18.0.3:30851
  peerlink create gatewayclient --remote-cluster-id cluster-b \
    --addresses 172.18.0.3 --port 30851 -o yaml`,
		}
	}
	createCommand(g, cmd, func(p manifests.Peer) (client.Object, error) {
		return f.build(role, p, "--remote-cluster-id")
	})
	if role == gatewayrole.Server {
		f.server.register(cmd, createServerFlags, "", true)
		f.addCommon(cmd, netv1beta1.DefaultServerTemplateName, "name of the WgGatewayServerTemplate", "namespace of the template")
		return cmd
	}
	flags := cmd.Flags()
	flags.StringArrayVar(&f.addresses, "addresses", nil, "addresses of the peer's gateway server (repeatable, or a comma-separated list)")
	flags.Int32Var(&f.server.port, "port", netv1beta1.DefaultGatewayPort, "port of the peer's gateway server")
	flags.StringVar(&f.protocol, "protocol", string(corev1.ProtocolUDP), "transport protocol of the tunnel: UDP")
	f.addCommon(cmd, netv1beta1.DefaultClientTemplateName, "name of the WgGatewayClientTemplate", "namespace of the template")
	return cmd
}

func newCreatePublicKeyCmd(g *globalOptions) *cobra.Command {
	var key string
	cmd := createCommand(g, &cobra.Command{
		Use:     "publickey [NAME]",
		Aliases: []string{"pk", "pkey"},
		Short:   "Hand the public key of a peer's gateway to this cluster",
		Long: `Create the PublicKey of a peer's gateway. --remote-cluster-id is the peer, the
cluster that owns the key; --public-key is the key as wg pubkey prints it (the
base64 of 32 bytes).`,
		Example: `  peerlink create publickey --remote-cluster-id cluster-b \
    --public-key 'jP7cM1l5b7nJ8a9N0fQ8nL2S0yq3q8c1b2Yx3cQmE2M=' -o yaml`,
	}, func(p manifests.Peer) (client.Object, error) {
		// A key pasted on the command line may carry the line break
		// wg pubkey prints; a manifest's may not, as the CRD says.
		raw, err := manifests.ParsePublicKey(strings.TrimSpace(key))
		if err != nil {
			return nil, fmt.Errorf("--public-key: %w", err)
		}
		pk, err := manifests.PublicKey(manifests.PublicKeyOptions{Peer: p, Key: raw})
		return pk, manifests.WithNames(err, map[string]string{"metadata.name": "NAME", manifests.RemoteClusterIDPath().String(): "--remote-cluster-id"})
	})
	cmd.Flags().StringVar(&key, "public-key", "", "the peer gateway's public key, base64 as wg pubkey prints it (required)")
	_ = cmd.MarkFlagRequired("public-key")
	return cmd
}
