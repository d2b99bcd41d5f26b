package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/peerlink/peerlink/peerbundle"
)

func newLintCmd() *cobra.Command {
	var peerBundle string
	cmd := &cobra.Command{
		Use:   "lint DIR",
		Short: "Check a peer bundle before it is committed or applied",
		Long: `Build the peer bundle DIR with kustomize and check what it produces:
  - every networking.liqo.io object decodes strictly into the API (unknown
    fields are errors) and has valid CIDRs, ports, MTU and 32-byte keys;
  - the liqo.io/remote-cluster-id labels agree, and there is one gateway;
  - every object is in a namespace the bundle creates or holds its gateway in;
  - no private key: no Secret with data.privateKey, no privateKey field at all.
With --peer-bundle, the peer's bundle of the same peering is checked too, and
across both: a pinned server port matches the client's port, the MTUs are
equal, a client points at the server's pinned load-balancer IP, and the two
bundles do not hold the same public key.

A template reference naming the default template in a namespace other than
peerlink's or the gateway's (Liqo's manifests name liqo) gets a warning: the
controller renders its installed default in its place where that namespace
does not exist.

Each finding names the file, the object and the field. The exit code is 1
when there is any finding other than a warning.`,
		Example: `  peerlink lint bundles/cluster-b
  peerlink lint clusters/a/peers/cluster-b --peer-bundle clusters/b/peers/cluster-a`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			findings := peerbundle.Lint(args[0])
			if peerBundle != "" {
				findings = append(findings, peerbundle.Lint(peerBundle)...)
				findings = append(findings, peerbundle.LintPair(args[0], peerBundle)...)
			}
			if err := printFindings(cmd.OutOrStdout(), findings); err != nil {
				return err
			}
			warnings := 0
			for _, f := range findings {
				if f.Warning {
					warnings++
				}
			}
			switch {
			case len(findings) > warnings:
				return fmt.Errorf("%d finding(s)", len(findings)-warnings)
			case warnings > 0:
				fmt.Fprintf(cmd.OutOrStdout(), "%d warning(s), no errors\n", warnings)
			default:
				fmt.Fprintln(cmd.OutOrStdout(), "no findings")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&peerBundle, "peer-bundle", "", "the peer's bundle of the same peering, for the checks across both sides")
	return cmd
}

func printFindings(w io.Writer, findings []peerbundle.Finding) error {
	for _, f := range findings {
		if _, err := fmt.Fprintln(w, f.String()); err != nil {
			return err
		}
	}
	return nil
}
