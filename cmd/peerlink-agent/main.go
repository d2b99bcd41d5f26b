// Command peerlink-agent is the one binary of every peerlink pod. Its
// subcommands are the controller (reconcilers of the API), the gateway agent
// (one per peering: WireGuard, NAT, routes, health), the fabric agent (one
// per node: the overlay that brings traffic to the gateways), the probe
// pods of `peerlink verify`, and the init container that turns on IPv6
// forwarding in the gateway pods of a cluster with IPv6 ranges.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/peerlink/peerlink/internal/version"
)

// terminationLog is where the kubelet reads a container's termination
// message from (the default terminationMessagePath), mounted into every
// container it runs.
const terminationLog = "/dev/termination-log"

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		writeTerminationMessage(err)
		os.Exit(1)
	}
}

// writeTerminationMessage leaves why the agent stopped where the pod's
// status shows it (kubectl describe pod; peerlink install reports it),
// when it runs in a container: outside one, the file does not exist and
// nothing is created.
func writeTerminationMessage(err error) {
	f, openErr := os.OpenFile(terminationLog, os.O_WRONLY|os.O_TRUNC, 0)
	if openErr != nil {
		return
	}
	defer f.Close()
	fmt.Fprint(f, err)
}

// newRootCommand builds the command tree of the agent.
func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "peerlink-agent",
		Short: "The peerlink controller, gateway and fabric agents",
		// --version prints it.
		Version:       version.Get().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("peerlink-agent {{.Version}}\n")
	root.AddCommand(newControllerCommand())
	root.AddCommand(newGatewayCommand())
	root.AddCommand(newFabricCommand())
	root.AddCommand(newProbeCommand())
	root.AddCommand(newIPv6ForwardingCommand())
	return root
}

// subcommand completes cmd, a command without arguments: addFlags defines
// its flags, parse makes what it runs with of them (failing on what the
// flags cannot mean), and run runs it.
func subcommand[T any](cmd *cobra.Command, addFlags func(*pflag.FlagSet), parse func() (T, error), run func(T) error) *cobra.Command {
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(*cobra.Command, []string) error {
		v, err := parse()
		if err != nil {
			return err
		}
		return run(v)
	}
	addFlags(cmd.Flags())
	return cmd
}
