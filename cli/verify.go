package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/peerlink/peerlink/peering"
)

func newVerifyCmd(g *globalOptions) *cobra.Command {
	var f documentFlags
	var remote cluster
	var o peering.VerifyOptions
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Send traffic both ways across a peering and report each path",
		Long: `Check a peering the way its traffic sees it. In each of the two clusters,
verify starts, in namespace ` + peering.VerifyNamespace + `, an echo pod behind a Service it
exports, then asks the other cluster's echo pod:
  - pod to pod: from a pod, at the address this cluster reaches it under
    (remapped when the pod ranges collide);
  - node to pod: the same, from a pod on the host network;
  - Service by clusterset name: echo-<cluster ID>.` + peering.VerifyNamespace + `.svc.clusterset.local.
Each answer must come from that echo pod. The pods run the image of each
cluster's controller, so nothing else is pulled. The namespace is deleted at
the end (--keep leaves it).

It needs both clusters: --remote-kubeconfig or --remote-context names the
peer. The exit code is 1 when a path failed; the table says which, and why.`,
		Example: `  peerlink verify --kubeconfig a.kubeconfig --remote-kubeconfig b.kubeconfig
  peerlink verify --context a --remote-context b -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !remote.given() {
				return errors.New("--remote-kubeconfig or --remote-context is required: verify sends traffic both ways")
			}
			if o.Attempts < 1 {
				return fmt.Errorf("--attempts %d: must be at least 1", o.Attempts)
			}
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			p := progress(cmd.ErrOrStderr(), timeout)
			local, other, err := g.openSides(ctx, remote, p)
			if err != nil {
				return err
			}
			local.Progress, other.Progress = p.With("local"), p.With("remote")
			o.PeerlinkNamespace = g.PeerlinkNamespace
			v, err := peering.Verify(ctx, local, other, o)
			if err != nil {
				return err
			}
			return f.printChecks(out, v, v.WriteSummary, v.Failed(), len(v.Paths), "paths")
		},
	}
	f.addFlags(cmd)
	remote = addRemoteCluster(cmd.Flags(), "kubeconfig of the peer cluster", "kubeconfig context of the peer cluster")
	cmd.Flags().IntVar(&o.Attempts, "attempts", 10, "requests each path gets, a second apart, before it counts as failed")
	cmd.Flags().BoolVar(&o.Keep, "keep", false, "leave namespace "+peering.VerifyNamespace+" and its pods in both clusters, for a look")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Minute, "how long each wait (a pod ready, a probe done) lasts before giving up")
	return cmd
}
