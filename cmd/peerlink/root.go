package main

import (
	"github.com/spf13/cobra"
)

// newRootCmd builds the peerlink command tree. Each subcommand lives in its
// own file and is added here.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "peerlink",
		Short:         "Connect the pod networks of independent Kubernetes clusters",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newRenderCmd())
	return root
}
