package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/peerlink/peerlink/internal/choice"
	"github.com/peerlink/peerlink/peering/probe"
)

// newProbeCommand is `peerlink-agent probe`, the pods `peerlink verify`
// starts: serve answers HTTP requests with the pod's name, check asks
// targets and prints what answered.
func newProbeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Answer and send the test requests of peerlink verify",
	}
	var addr, pod string
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Answer every HTTP request with this pod's name, until SIGTERM",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			if pod == "" {
				return errors.New("--pod-name (or the POD_NAME variable) is required")
			}
			return probe.Serve(ctx, addr, pod)
		},
	}
	serve.Flags().StringVar(&addr, "listen", ":8090", "address to answer on")
	serve.Flags().StringVar(&pod, "pod-name", os.Getenv("POD_NAME"), "name of this pod, in every answer (default: the POD_NAME variable)")

	var targets []string
	var attempts int
	var timeout time.Duration
	check := &cobra.Command{
		Use:   "check",
		Short: "Ask each target until it answers, and print one JSON line per target",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(targets) == 0 || attempts < 1 || timeout <= 0 {
				return errors.New("--target (at least one), --attempts (at least 1) and --timeout (positive) are required")
			}
			ts, err := choice.Each(targets, probe.ParseTarget)
			if err != nil {
				return fmt.Errorf("--target: %w", err)
			}
			return probe.Check(cmd.Context(), cmd.OutOrStdout(), ts, attempts, timeout)
		},
	}
	check.Flags().StringArrayVar(&targets, "target", nil, "name=http://host:port/ to ask (repeated)")
	check.Flags().IntVar(&attempts, "attempts", 10, "requests to send each target before it counts as failed, a second apart")
	check.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "time each request may take")
	cmd.AddCommand(serve, check)
	return cmd
}
