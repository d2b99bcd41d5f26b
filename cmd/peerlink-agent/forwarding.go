package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/peerlink/peerlink/dataplane/route"
)

// newIPv6ForwardingCommand is `peerlink-agent ipv6-forwarding`: the init
// container the controller adds to the gateway pods of a cluster with IPv6
// ranges turns on IPv6 forwarding for the pod, which the gateway agent,
// without the privilege to write /proc/sys, cannot do itself.
func newIPv6ForwardingCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "ipv6-forwarding",
		Short: "Turn on IPv6 forwarding in this network namespace (net.ipv6.conf.all.forwarding=1)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			wrote, err := route.EnableIPv6Forwarding()
			if err != nil {
				return err
			}
			state := "was on already"
			if wrote {
				state = "turned on"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "IPv6 forwarding %s\n", state)
			return nil
		},
	}
}
