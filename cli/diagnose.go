package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/peerlink/peerlink/peering"
)

func newDiagnoseCmd(g *globalOptions) *cobra.Command {
	var f documentFlags
	var remote cluster
	cmd := &cobra.Command{
		Use:   "diagnose",
		Short: "Check this cluster and each of its peerings, and say what to fix",
		Long: `Check, from the API server, what peerlink needs on this cluster and for each
peer, and say in plain words what to fix where a check fails:
  - the controller available, a ready fabric agent on every node;
  - for each peer: its Configuration ready, this side's gateway ready with an
    endpoint, the peer's PublicKey held, the tunnel Connected, the MTU both
    gateways announce the same and carried whole by the path.

With --remote-kubeconfig or --remote-context (a cluster holding the other side
of some peerings), also across the two: each side holds the key the other's
tunnel runs on, and the two API servers' clocks agree.

The exit code is 1 when a check failed.`,
		Example: `  peerlink diagnose
  peerlink diagnose --kubeconfig a.kubeconfig --remote-kubeconfig b.kubeconfig
  peerlink diagnose -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			p := progress(cmd.ErrOrStderr(), time.Minute)
			local, other, err := g.openSides(ctx, remote, p)
			if err != nil {
				return err
			}
			d, err := peering.Diagnose(ctx, local, other, g.PeerlinkNamespace)
			if err != nil {
				return err
			}
			return f.printChecks(out, d, d.WriteSummary, d.Failed(), len(d.Findings), "checks")
		},
	}
	f.addFlags(cmd)
	remote = addRemoteCluster(cmd.Flags(), "kubeconfig of a peer cluster, to check across both sides", "kubeconfig context of that peer cluster")
	return cmd
}
