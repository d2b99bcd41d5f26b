package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/peerlink/peerlink/peering"
)

func newExportCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "export",
		Short:   "Export a Service to every peer (Multi-Cluster Services API)",
		Example: `  peerlink export service default/echo --wait`,
	}
	var out outputFlag
	var wait bool
	var timeout time.Duration
	svc := &cobra.Command{
		Use:   "service NAMESPACE/NAME",
		Short: "Export a Service: apply its ServiceExport, or print it with -o",
		Long: `Export the Service NAMESPACE/NAME to every peer of this cluster: a ServiceExport
of the same name, which the controller sends to the peers through the tunnels.
A peer imports it in the namespace of the same name, where its admin allows
imports, as <name>.<namespace>.svc.clusterset.local.

With -o yaml|json the ServiceExport is printed, to commit in a bundle, and
nothing else happens.`,
		Example: `  peerlink export service default/echo --wait
  peerlink export service default/echo -o yaml > peers/serviceexport-echo.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, err := peering.ParseServiceRef(args[0])
			if err != nil {
				return err
			}
			if out.format != "" {
				return out.print(cmd, peering.ServiceExport(ns, name))
			}
			c, err := g.local().client()
			if err != nil {
				return err
			}
			return peering.ExportService(cmd.Context(), c, progress(cmd.OutOrStdout(), timeout), ns, name, wait)
		},
	}
	out.add(svc, "")
	svc.Flags().BoolVar(&wait, "wait", false, "wait until the controller reports the export Ready")
	svc.Flags().DurationVar(&timeout, "timeout", defaultTimeout, "how long the wait lasts before giving up")
	cmd.AddCommand(svc)
	return cmd
}

func newUnexportCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "unexport",
		Short:   "Stop exporting a Service to the peers",
		Example: `  peerlink unexport service default/echo`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:     "service NAMESPACE/NAME",
		Short:   "Delete the ServiceExport of a Service: the peers drop their import of it",
		Example: `  peerlink unexport service default/echo`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, err := peering.ParseServiceRef(args[0])
			if err != nil {
				return err
			}
			c, err := g.local().client()
			if err != nil {
				return err
			}
			return peering.UnexportService(cmd.Context(), c, progress(cmd.OutOrStdout(), 0), ns, name)
		},
	})
	return cmd
}
