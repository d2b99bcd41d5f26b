// Command peerlink is the command-line interface of peerlink: it generates the
// manifests two administrators exchange, renders gateway templates offline,
// manages peer bundles for GitOps, and connects two clusters in one command.
// The commands live in package cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/peerlink/peerlink/cli"
)

func main() {
	// Interrupting stops waits cleanly; every command can be run again.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
