package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/peerlink/peerlink/internal/rangepolicy"
	"github.com/peerlink/peerlink/peerbundle"
)

func newLintCmd() *cobra.Command {
	var peerBundle string
	var factFlags peerFactFlags
	cmd := &cobra.Command{
		Use:   "lint DIR",
		Short: "Check a peer bundle before it is committed or applied",
		Long: `Build the peer bundle DIR with kustomize and check what it produces:
  - only local files: a remote resource, base, component or file (a URL, a
    git repository) is refused before anything is fetched;
  - every networking.liqo.io object decodes strictly into the API (unknown
    fields are errors) and has valid CIDRs (at most 64 per list), ports, MTU,
    server addresses and keys (spec.publicKey and spec.nextPublicKey: the
    canonical base64 of 32 bytes, never all zero);
  - the peer's ranges (the Configuration's spec.remote) lie in the
    allowlist, as bundle add and the controller check them;
  - the liqo.io/remote-cluster-id labels agree, there is one gateway, and one
    Configuration and one PublicKey of the peer;
  - every object is in a namespace the bundle creates or holds its gateway in,
    never a kube- namespace nor the tenant namespace of another peer;
  - no private key: no Secret with data.privateKey, no privateKey field at all.
With --peer-bundle, the peer's bundle of the same peering is checked too, and
across both: a pinned server port matches the client's port, the MTUs are
equal, a client points at the server's pinned load-balancer IP, and the two
bundles do not hold the same public key. The peer's bundle holds this
cluster's ranges, which the peer's controller checks: they are held to the
default allowlist.

A template reference naming the default template in a namespace other than
peerlink's or the gateway's (Liqo's manifests name liqo) gets a warning: the
controller renders its installed default in its place where that namespace
does not exist. Any other template in such a namespace gets a warning too
(the controller refuses it), and so does a spec.secretRef: the key pair then
comes from outside the bundle.

Each finding names the file, the object and the field. The exit code is 1
when there is any finding other than a warning.

` + peerFactsHelp + `

Lint reports the placements when the plan is given (--routed-peer-cidr or
--cluster-info), after the findings, on lines that begin with INFO: they are
no findings and leave the exit code as it is.`,
		Example: `  peerlink lint bundles/cluster-b
  peerlink lint clusters/a/peers/cluster-b --peer-bundle clusters/b/peers/cluster-a

  # With this cluster's allowlist and address plan for peers
  peerlink info -o yaml > cluster-a.yaml
  peerlink lint clusters/a/peers/cluster-b --cluster-info cluster-a.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			facts, _, err := factFlags.load()
			if err != nil {
				return err
			}
			findings := peerbundle.Lint(args[0], facts.Policy)
			if peerBundle != "" {
				findings = append(findings, peerbundle.Lint(peerBundle, rangepolicy.Policy{})...)
				findings = append(findings, peerbundle.LintPair(args[0], peerBundle)...)
			}
			if err := printFindings(cmd.OutOrStdout(), findings); err != nil {
				return err
			}
			if facts.PlanKnown {
				for _, p := range peerbundle.BundlePlacements(args[0], facts.Policy) {
					fmt.Fprintf(cmd.OutOrStdout(), "INFO   %s\n", p)
				}
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
	factFlags.register(cmd)
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
