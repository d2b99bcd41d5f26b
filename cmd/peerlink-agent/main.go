// Command peerlink-agent is the one binary of every peerlink pod. Its
// subcommands are the controller (reconcilers of the API), the gateway agent
// (one per peering: WireGuard, NAT, routes, health) and the fabric agent (one
// per node: the overlay that brings traffic to the gateways).
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use:           "peerlink-agent",
		Short:         "The peerlink controller, gateway and fabric agents",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newControllerCommand())
	root.AddCommand(newGatewayCommand())
	root.AddCommand(newFabricCommand())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
