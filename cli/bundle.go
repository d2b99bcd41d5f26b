package cli

import (
	"cmp"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/peerbundle"
	"github.com/peerlink/peerlink/peering"
)

func newBundleCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bundle",
		Short: "Manage the GitOps peer bundle of one peering",
		Long: `A peer bundle is a kustomize directory holding the objects of one peering on
this cluster: this side's gateway, and what the peer sent (its Configuration,
its PublicKey and, for a client, the GatewayClient pointing at the server).
Two files travel between the admins, one each way; no private key does.

  client admin: bundle init --role client, apply, bundle export  -> file 1
  server admin: bundle init --role server, bundle add file 1, apply,
                bundle export                                    -> file 2
  client admin: bundle add file 2, apply                         -> Connected`,
		Example: `  peerlink bundle init peers/cluster-b --peer cluster-b --role client
  peerlink bundle export --peer cluster-b -o to-cluster-b.yaml
  peerlink bundle add peers/cluster-b from-cluster-b.yaml`,
	}
	cmd.AddCommand(newBundleInitCmd(g), newBundleExportCmd(g), newBundleAddCmd())
	return cmd
}

func newBundleInitCmd(g *globalOptions) *cobra.Command {
	var peer, role string
	var force bool
	f := gatewayFlags{portNeeded: "the server's port is needed with --addresses", portOptional: true}
	cmd := &cobra.Command{
		Use:   "init DIR --peer ID --role server|client",
		Short: "Start the bundle of a peering with this side's gateway",
		Long: `Write DIR/kustomization.yaml, the tenant namespace and this side's gateway.

A client usually does not know the server's endpoint yet: its GatewayClient
gets an empty endpoint, which is valid; the controller still creates its keys
and reports WaitingForEndpoint until bundle add fills the endpoint in.

Running init again with the same flags changes nothing; with other flags it
refuses to overwrite the gateway unless --force (which also empties an
endpoint bundle add filled in). An existing kustomization.yaml is kept, with
the files of init added to its resources when missing.`,
		Example: `  # Client side, on cluster A, peering with cluster-b
  peerlink bundle init peers/cluster-b --peer cluster-b --role client

  # Server side, on cluster B, exposed on a fixed node port
  peerlink bundle init peers/cluster-a --peer cluster-a --role server \
    --service-type NodePort --node-port 30851`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := gatewayrole.Parse(role)
			if err != nil {
				return fmt.Errorf("--role: %w", err)
			}
			p, err := peerOf("--peer", peer, g.namespace(), "")
			if err != nil {
				return err
			}
			// The flags of the other role would change nothing.
			other, otherRole := []string{"addresses"}, "client"
			if r == gatewayrole.Client {
				other, otherRole = []string{createServerFlags.serviceType, createServerFlags.nodePort, createServerFlags.loadBalancerIP}, "server"
			} else {
				f.server.port = cmp.Or(f.server.port, netv1beta1.DefaultGatewayPort)
			}
			for _, name := range other {
				if cmd.Flags().Changed(name) {
					return fmt.Errorf("--%s: only for --role %s", name, otherRole)
				}
			}
			gateway, err := f.build(r, p, "--peer")
			if err != nil {
				return err
			}
			err = peerbundle.Init(cmd.OutOrStdout(), args[0], gateway, force)
			if _, ok := errors.AsType[*peerbundle.ConflictError](err); ok {
				return fmt.Errorf("%w: pass --force to overwrite", err)
			}
			return err
		},
	}
	flags := cmd.Flags()
	flags.StringVar(&peer, "peer", "", "ID of the peer cluster (required)")
	flags.StringVar(&role, "role", "", "this side's role: server or client (required)")
	_ = cmd.MarkFlagRequired("peer")
	_ = cmd.MarkFlagRequired("role")
	f.server.register(cmd, createServerFlags, "server: ", false)
	flags.Int32Var(&f.server.port, "port", 0, "server: WireGuard port of the Service (default 51840); client: the server's port, when known")
	flags.StringArrayVar(&f.addresses, "addresses", nil, "client: the server's addresses, when known")
	f.addCommon(cmd, "", "gateway template name (default: wireguard-server or wireguard-client)", "gateway template namespace")
	flags.BoolVar(&force, "force", false, "overwrite files of an existing bundle")
	_ = cmd.RegisterFlagCompletionFunc("role", cobra.FixedCompletions([]string{string(gatewayrole.Server), string(gatewayrole.Client)}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func newBundleExportCmd(g *globalOptions) *cobra.Command {
	var peer, output string
	var timeout = defaultTimeout
	cmd := &cobra.Command{
		Use:   "export --peer ID -o FILE",
		Short: "Write what the peer needs from this cluster into one file",
		Long: `Read this cluster and write, in one multi-document YAML file for the peer:
  - this cluster's Configuration (as generate configuration prints it);
  - the PublicKey of this side's gateway for the peer (its public half only);
  - on the server side, the GatewayClient the peer should use, pointing at
    this server's published endpoint, with this side's MTU.
It waits (--timeout) until the controller has generated the key and, for a
server, published the endpoint. The gateway is looked up in -n, by default
liqo-tenant-<peer id>. Use -o - to write to stdout.`,
		Example: `  peerlink bundle export --peer cluster-b -o to-cluster-b.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := clusterinfo.ValidateClusterID(peer); err != nil {
				return fmt.Errorf("--peer: %w", err)
			}
			if output == "" {
				return errors.New("--output: a file to write is required (- for stdout)")
			}
			out, progressOut := cmd.OutOrStdout(), cmd.OutOrStdout()
			if output == "-" {
				progressOut = cmd.ErrOrStderr()
			}
			ns := cmp.Or(g.namespace(), manifests.TenantNamespace(peer))
			cl, err := g.localClient(cmd.Context())
			if err != nil {
				return err
			}
			p := progress(progressOut, timeout)
			objs, err := peering.Export(cmd.Context(), cl, p, g.PeerlinkNamespace, ns, peer)
			if err != nil {
				return err
			}
			data, err := manifests.Marshal(manifests.FormatYAML, objs...)
			if err != nil {
				return err
			}
			if output == "-" {
				_, err := out.Write(data)
				return err
			}
			if err := os.WriteFile(output, data, 0o644); err != nil {
				return fmt.Errorf("--output: %w", err)
			}
			p.Infof("%s written: send it to the admin of %s", output, peer)
			return nil
		},
	}
	cmd.Flags().StringVar(&peer, "peer", "", "ID of the peer cluster (required)")
	_ = cmd.MarkFlagRequired("peer")
	cmd.Flags().StringVarP(&output, "output", "o", "", "file to write, - for stdout (required)")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultTimeout, "how long to wait for the gateway's key and endpoint")
	return cmd
}

func newBundleAddCmd() *cobra.Command {
	var facts peerFactFlags
	cmd := &cobra.Command{
		Use:   "add DIR FILE",
		Short: "Add what the peer sent to the bundle",
		Long: `Add the objects of FILE (what the peer's bundle export wrote) to the bundle
DIR: each object becomes its own file, listed in kustomization.yaml, in the
bundle's namespace (without one, liqo-tenant-<peer>). The bundle keeps one
Configuration and one PublicKey of the peer: a received one replaces the
bundle's. A GatewayClient from the server only fills in the endpoint of this
bundle's own GatewayClient, keeping its name, namespace, template, key Secret
and replicas; a bundle without one gets a GatewayClient with this side's
defaults first, as bundle init makes it. If the server's MTU differs, it is
taken and that is reported.

Received objects are checked first: kinds (one Configuration, one PublicKey,
one GatewayClient at most), schema, labels for this bundle's peer, canonical
non-zero keys (spec.publicKey and spec.nextPublicKey), values exactly as the
controller takes them (no surrounding spaces), at most 64 ranges per list and
16 server addresses, no server name of this host or its link (localhost,
*.local, an address in disguise), and the peer's ranges against the
allowlist. Only the remote-cluster-id label of what the peer sent is kept,
none of its annotations. A file over 1 MiB is refused. Nothing is written
when anything is wrong, and the files are replaced all together.

` + peerFactsHelp + `

Bundle add reports the peer's ranges after writing, also without a plan
(every range is then remapped).`,
		Example: `  peerlink bundle add peers/cluster-b from-cluster-b.yaml

  # With this cluster's allowlist and address plan for peers
  peerlink info -o yaml > cluster-a.yaml
  peerlink bundle add peers/cluster-b from-cluster-b.yaml --cluster-info cluster-a.yaml`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, _, err := facts.load()
			if err != nil {
				return err
			}
			return peerbundle.Add(cmd.OutOrStdout(), args[0], args[1], f.Policy)
		},
	}
	facts.register(cmd)
	return cmd
}
