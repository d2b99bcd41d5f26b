package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/field"
	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/peering"
)

// networkOptions are the flags of network connect, disconnect and reset.
type networkOptions struct {
	g       *globalOptions
	remote  cluster
	timeout time.Duration
	// plan holds the flags of connect that need no parsing.
	plan                            peering.ConnectOptions
	mtu                             int
	server                          serverFlags
	clientAddresses                 []string
	disableSharingKeys, skipConfirm bool
	// wait is --wait of init, disconnect and reset.
	wait bool
	// inBand, inBandDir and tokenDuration are --in-band and its flags.
	inBand        bool
	inBandDir     string
	tokenDuration time.Duration
}

func newNetworkCmd(g *globalOptions) *cobra.Command {
	o := &networkOptions{g: g}
	cmd := &cobra.Command{
		Use:   "network",
		Short: "Initialize, connect, disconnect or reset the network peering of two clusters, with both kubeconfigs",
		Long: `Peer two clusters in one command when you hold both kubeconfigs. The local
cluster (--kubeconfig/--context) becomes the gateway client, the remote one
(--remote-kubeconfig/--remote-context) the gateway server.

The objects go to the tenant namespaces: on each cluster liqo-tenant-<peer id>,
named after the peer. Every command is idempotent: an interrupted run can be
run again.`,
		Example: `  peerlink network init --kubeconfig a.kubeconfig --remote-kubeconfig b.kubeconfig --wait
  peerlink network connect --kubeconfig a.kubeconfig --remote-kubeconfig b.kubeconfig --wait
  peerlink network disconnect --kubeconfig a.kubeconfig --remote-kubeconfig b.kubeconfig
  peerlink network reset --kubeconfig a.kubeconfig --remote-kubeconfig b.kubeconfig --skip-confirm`,
	}
	pf := cmd.PersistentFlags()
	o.remote = addRemoteCluster(pf, "kubeconfig of the remote cluster (the gateway server side)", "kubeconfig context of the remote cluster")
	pf.DurationVar(&o.timeout, "timeout", defaultTimeout, "how long each wait lasts before giving up")
	cmd.AddCommand(newInitCmd(o), newConnectCmd(o), newDisconnectCmd(o), newResetCmd(o))
	return cmd
}

// sides connects to both clusters and reads what they publish.
func (o *networkOptions) sides(ctx context.Context, out io.Writer) (*peering.Cluster, *peering.Cluster, error) {
	if o.g.namespace() != "" {
		return nil, nil, errors.New("--namespace: the network commands use the tenant namespaces, liqo-tenant-<peer id> on each cluster")
	}
	if !o.remote.given() {
		return nil, nil, errors.New("--remote-kubeconfig or --remote-context is required: the remote cluster is the gateway server side")
	}
	p := progress(out, o.timeout)
	local, err := o.g.open(ctx, "local", o.g.local(), p)
	if err != nil {
		return nil, nil, err
	}
	remote, err := o.g.open(ctx, "remote", o.remote, p)
	if err != nil {
		return nil, nil, err
	}
	return local, remote, nil
}

func newInitCmd(o *networkOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Exchange the two clusters' Configurations, the first step of connect",
		Long: `Apply each cluster's Configuration (its pod and external CIDRs) in its tenant
namespace on the other cluster, so that each controller remaps the other's
ranges; with --wait, wait until both Configurations are Ready. connect does
this too and finds it done.`,
		Example: `  peerlink network init --kubeconfig a.kubeconfig --remote-kubeconfig b.kubeconfig --wait`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			local, remote, err := o.sides(cmd.Context(), cmd.OutOrStdout())
			if err != nil {
				return err
			}
			return peering.Init(cmd.Context(), local, remote, o.wait)
		},
	}
	cmd.Flags().BoolVar(&o.wait, "wait", false, "wait until both Configurations are Ready")
	return cmd
}

func newConnectCmd(o *networkOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "connect",
		Short: "Peer the networks of the local (client) and remote (server) clusters",
		Long: `Peer the networks of two clusters, in this order:
  1. read both clusters' facts (their cluster-info ConfigMaps);
  2. apply each cluster's Configuration on the other and wait until both are Ready;
  3. apply the GatewayServer on the remote cluster, wait for its endpoint and key;
  4. apply the GatewayClient on the local cluster, pointing at that endpoint
     (or at --gw-client-address/--gw-client-port), and wait for its key;
  5. hand each gateway's public key to the other cluster (unless --disable-sharing-keys);
  6. with --wait, wait until both Connections report Connected.

With --in-band (which implies --wait), each cluster's API server is then
remapped into its external CIDR (the IP object peerlink-api-server in
--peerlink-namespace), so that the other reaches it only through the tunnel,
and each cluster's kubeconfig for the other is written into
--in-band-kubeconfig-dir as <cluster id>.kubeconfig: a token of the
ServiceAccount peerlink-peer in the peer's tenant namespace, which may read
the peering's objects there and write PublicKeys, nothing else.`,
		Example: `  peerlink network connect --kubeconfig a.kubeconfig --remote-kubeconfig b.kubeconfig \
    --server-service-type NodePort --wait`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.connect(cmd.Context(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.plan.Wait, "wait", false, "wait until the tunnel is Connected on both sides")
	f.IntVar(&o.mtu, "mtu", netv1beta1.DefaultMTU, "MTU of the tunnel")
	f.Int32Var(&o.plan.Server.Replicas, "gw-server-replicas", 0, "gateway server: "+"number of gateway pods: one carries the tunnel, the others stand by to take over (default: the API's, one)")
	f.Int32Var(&o.plan.ClientReplicas, "gw-client-replicas", 0, "gateway client: "+"number of gateway pods: one carries the tunnel, the others stand by to take over (default: the API's, one)")
	o.server.register(cmd, connectServerFlags, "gateway server: ", true, connectServerAliases)
	f.StringArrayVar(&o.clientAddresses, "gw-client-address", nil, "address the client connects to, instead of the server's published endpoint")
	f.Int32Var(&o.plan.ClientPort, "gw-client-port", 0, "port the client connects to, instead of the server's published endpoint")
	f.BoolVar(&o.disableSharingKeys, "disable-sharing-keys", false, "do not hand the public keys over (they are exchanged another way)")
	f.BoolVar(&o.inBand, "in-band", false, "make each API server reachable by the other cluster through the tunnel, and write each cluster's kubeconfig for the other (implies --wait)")
	f.StringVar(&o.inBandDir, "in-band-kubeconfig-dir", ".", "with --in-band, where to write the kubeconfigs, <cluster id>.kubeconfig")
	f.DurationVar(&o.tokenDuration, "in-band-token-duration", defaultTokenDuration, "with --in-band, how long the kubeconfigs' tokens are valid (the API server may shorten it)")
	return cmd
}

// connectPlan checks the flags of connect.
func (o *networkOptions) connectPlan() (peering.ConnectOptions, error) {
	plan := o.plan
	server, err := o.server.options(o.mtu, "", "")
	if err != nil {
		return plan, err
	}
	server.Replicas = plan.Server.Replicas
	plan.Server, plan.ShareKeys = server, !o.disableSharingKeys
	if plan.ClientAddresses, err = manifests.ParseAddressList(o.clientAddresses...); err != nil {
		return plan, fmt.Errorf("--gw-client-address: %w", err)
	}
	if o.inBand {
		if err := peering.CheckTokenDuration(o.tokenDuration); err != nil {
			return plan, field.WithFlags(err, map[string]string{"Duration": "--in-band-token-duration"})
		}
	}
	return plan, field.WithFlags(plan.Check(), map[string]string{
		"ServerReplicas": "--gw-server-replicas", "ClientReplicas": "--gw-client-replicas", "ClientPort": "--gw-client-port"})
}

func (o *networkOptions) connect(ctx context.Context, out io.Writer) error {
	plan, err := o.connectPlan()
	if err != nil {
		return err
	}
	local, remote, err := o.sides(ctx, out)
	if err != nil {
		return err
	}
	if o.inBand {
		plan.Wait = true
	}
	if err := peering.Connect(ctx, local, remote, plan); err != nil {
		return err
	}
	if o.inBand {
		return o.writeInBand(ctx, local, remote)
	}
	if !plan.Wait {
		id := remote.Info.ClusterID
		local.Progress.Infof("Peering with %s set up; check the tunnel with `peerlink info peer %s`", id, id)
	}
	return nil
}

// writeInBand exposes both API servers through the tunnel and writes each
// cluster's kubeconfig for the other into --in-band-kubeconfig-dir.
func (o *networkOptions) writeInBand(ctx context.Context, local, remote *peering.Cluster) error {
	if err := os.MkdirAll(o.inBandDir, 0o700); err != nil {
		return fmt.Errorf("--in-band-kubeconfig-dir: %w", err)
	}
	kubeconfigs, err := peering.InBand(ctx, local, remote, o.g.PeerlinkNamespace, o.tokenDuration)
	if err != nil {
		return err
	}
	for _, s := range []struct{ of, forPeer *peering.Cluster }{{local, remote}, {remote, local}} {
		path := filepath.Join(o.inBandDir, s.of.Info.ClusterID+".kubeconfig")
		if err := os.WriteFile(path, kubeconfigs[s.of.Info.ClusterID], 0o600); err != nil {
			return fmt.Errorf("--in-band-kubeconfig-dir: %w", err)
		}
		s.of.Progress.Infof("Kubeconfig of %s for %s written to %s: hand it to %s's admin", s.of.Info.ClusterID, s.forPeer.Info.ClusterID, path, s.forPeer.Info.ClusterID)
	}
	return nil
}

func newDisconnectCmd(o *networkOptions) *cobra.Command {
	return newTeardownCmd(o, false, "disconnect",
		"Remove the gateways and public keys of a peering, keeping the Configurations",
		`Remove, on both clusters, the gateways (GatewayServer, GatewayClient) and the
PublicKeys of the peering, and the peer's in-band identity (the ServiceAccount,
Role and RoleBinding peerlink-peer of connect --in-band), and wait until they
are gone. The Configurations stay, so a later connect keeps the same remapped
ranges.`)
}

func newResetCmd(o *networkOptions) *cobra.Command {
	return newTeardownCmd(o, true, "reset",
		"Remove everything of a peering: gateways, public keys, Configurations and empty tenant namespaces",
		`Remove, on both clusters, the gateways, PublicKeys and Configurations of the
peering, wait until they are gone, then delete the tenant namespaces when
nothing else is left in them, and wait until they are gone too.`)
}

// newTeardownCmd makes disconnect, or reset when all is set.
func newTeardownCmd(o *networkOptions, all bool, use, short, long string) *cobra.Command {
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Long:    long,
		Example: "  peerlink network " + use + " --kubeconfig a.kubeconfig --remote-kubeconfig b.kubeconfig --wait",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.teardown(cmd, all)
		},
	}
	cmd.Flags().BoolVar(&o.skipConfirm, "skip-confirm", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&o.wait, "wait", true, "wait until what is removed is gone (--wait=false only asks for the deletions)")
	return cmd
}

// teardown runs disconnect, or reset when all is set.
func (o *networkOptions) teardown(cmd *cobra.Command, all bool) error {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	local, remote, err := o.sides(ctx, out)
	if err != nil {
		return err
	}
	what, run := "the gateways and public keys", peering.Disconnect
	if all {
		what, run = "the gateways, public keys, Configurations and empty tenant namespaces", peering.Reset
	}
	if !o.skipConfirm {
		question := fmt.Sprintf("%s is a destructive command: it removes %s of the peering between %s (local) and %s (remote).\nAre you sure you want to continue?",
			cmd.Name(), what, local.Info.ClusterID, remote.Info.ClusterID)
		if err := confirm(cmd.InOrStdin(), out, question); err != nil {
			return err
		}
	}
	return run(ctx, local, remote, o.wait)
}

// confirm asks a yes/no question and reads the answer from in: a terminal,
// or a script's pipe that says yes. Without an answer (in closed) it
// refuses, naming --skip-confirm.
func confirm(in io.Reader, out io.Writer, question string) error {
	fmt.Fprintf(out, "%s [y/N]: ", question)
	answer, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read the answer: %w", err)
	}
	if answer == "" && errors.Is(err, io.EOF) {
		fmt.Fprintln(out)
		return errors.New("confirmation needed but stdin gave no answer: answer yes on stdin or pass --skip-confirm")
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return errors.New("cancelled: nothing was removed")
}
