package cli

import (
	"cmp"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/peering"
)

func newRotateKeyCmd(g *globalOptions) *cobra.Command {
	var peer string
	var out outputFlag
	var remoteCluster cluster
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "rotate-key",
		Short: "Replace the key pair of the gateway of a peering, losing no packet",
		Long: `Ask this cluster's gateway of the peering with --peer for a new key pair
(its spec.keyRotation is set to the current time). The controller makes the
pair in-cluster; the tunnel keeps running on the old pair until the peer's
gateway accepts the new public key, then moves to it without losing a packet,
and the old pair is forgotten.

With the peer's kubeconfig (--remote-kubeconfig/--remote-context) the command
carries the rotation to its end: it applies the PublicKey with both keys on the
peer, waits until the tunnel runs on the new pair, then applies the PublicKey
with the new key alone. Without it, the command prints the PublicKey with both
keys for the peer's admin to apply (or to commit to the peer's repository); the
old key keeps working until then. Once the rotation is done, ` + "`peerlink generate publickey`" + `
or ` + "`peerlink bundle export`" + ` prints the PublicKey with the new key alone.

In a GitOps repository, change spec.keyRotation of the GatewayServer or
GatewayClient to any new value instead.`,
		Example: `  # Both clusters at hand
  peerlink rotate-key --peer cluster-b --kubeconfig a.kubeconfig --remote-kubeconfig b.kubeconfig

  # Only this one: hand the printed PublicKey to the peer
  peerlink rotate-key --peer cluster-b > publickey-for-b.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := out.check(); err != nil {
				return err
			}
			if err := manifests.ValidateObjectName(peer); err != nil {
				return fmt.Errorf("--peer: %w", err)
			}
			ctx := cmd.Context()
			p := progress(cmd.ErrOrStderr(), timeout)
			local, remote, err := g.openSides(ctx, remoteCluster, p)
			if err != nil {
				return err
			}
			if remote != nil && remote.Info.ClusterID != peer {
				return fmt.Errorf("--remote-kubeconfig: the remote cluster is %s, not the peer %s", remote.Info.ClusterID, peer)
			}
			ns := cmp.Or(g.namespace(), manifests.TenantNamespace(peer))
			pk, err := peering.RotateKey(ctx, local, remote, ns, peer, time.Now().UTC().Format(time.RFC3339))
			if err != nil {
				return err
			}
			if remote != nil {
				p.Infof("Key rotation done: the tunnel runs on the new key pair")
				return nil
			}
			p.Infof("Apply this PublicKey on %s: the tunnel moves to the new key pair once its gateway accepts it", peer)
			return out.print(cmd, pk)
		},
	}
	out.add(cmd, string(manifests.FormatYAML))
	cmd.Flags().StringVar(&peer, "peer", "", "cluster ID of the peer (required)")
	remoteCluster = addRemoteCluster(cmd.Flags(), "kubeconfig of the peer's cluster, to carry the rotation to its end", "kubeconfig context of the peer's cluster")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute,
		"how long each wait lasts (the gateway sees a new key pair once the kubelet refreshes its key Secret, within about a minute)")
	_ = cmd.MarkFlagRequired("peer")
	return cmd
}
