package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/peering"
)

func newInfoCmd(g *globalOptions) *cobra.Command {
	var f documentFlags
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Show this cluster's ID, network and peers",
		Long: `Show what this cluster publishes (cluster ID and CIDRs) and, for each peer,
its ranges and their remapping, the gateway and the tunnel status.

--get prints one value of the document -o yaml shows, by a dot path whose
keys match case-insensitively: clusterid, network.podCIDRs, peers.0.network.gateway.`,
		Example: `  peerlink info
  peerlink info --get clusterid
  peerlink info --get network.podCIDRs
  peerlink info -o yaml > cluster-a-info.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := describe(cmd.Context(), g)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), doc, doc.WriteSummary)
		},
	}
	f.addFlags(cmd)
	cmd.AddCommand(newInfoPeerCmd(g))
	return cmd
}

func newInfoPeerCmd(g *globalOptions) *cobra.Command {
	var f documentFlags
	cmd := &cobra.Command{
		Use:   "peer ID",
		Short: "Show one peer: remapped ranges, gateway role and endpoint, tunnel status and latency",
		Example: `  peerlink info peer cluster-b
  peerlink info peer cluster-b --get network.gateway
  peerlink info peer cluster-b --get connection.status`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := describe(cmd.Context(), g)
			if err != nil {
				return err
			}
			peer, err := doc.Peer(args[0])
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), peer, peer.WriteSummary)
		},
	}
	f.addFlags(cmd)
	return cmd
}

// documentFlags are the flags of the commands that show a document (info,
// info peer, version): how to print it.
type documentFlags struct {
	out outputFlag
	get string
}

func (f *documentFlags) addFlags(cmd *cobra.Command) {
	f.out.addWithUsage(cmd, "", "yaml or json instead of the summary")
	cmd.Flags().StringVar(&f.get, "get", "", "print only the value at this dot path")
}

// print prints a document as YAML or JSON, one value of it with --get, or
// the human summary.
func (f *documentFlags) print(w io.Writer, doc any, human func(io.Writer)) error {
	if f.get == "" && f.out.format == "" {
		human(w)
		return nil
	}
	format := manifests.FormatYAML
	if f.out.format != "" {
		var err error
		if format, err = f.out.check(); err != nil {
			return err
		}
	}
	out, err := peering.Encode(doc, format, f.get)
	if err != nil {
		return fmt.Errorf("--get: %w", err)
	}
	_, err = w.Write(out)
	return err
}

// printChecks prints a report of checks as print does, then fails when
// some of its total checks (named what) failed, so the exit code says so.
func (f *documentFlags) printChecks(w io.Writer, doc any, human func(io.Writer), failed, total int, what string) error {
	if err := f.print(w, doc, human); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d %s failed", failed, total, what)
	}
	return nil
}

// describe reads what the cluster of the global flags knows of itself and
// its peers.
func describe(ctx context.Context, g *globalOptions) (*peering.Description, error) {
	cl, err := g.localClient(ctx)
	if err != nil {
		return nil, err
	}
	return peering.Describe(ctx, cl, g.PeerlinkNamespace)
}
