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

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/peerlink/peerlink/cli"
)

func main() {
	// controller-runtime from v0.25 logs through its root logger whenever
	// a client is made, and prints a stack trace to stderr when that
	// logger was never set 30 s into the process: this command reports
	// through its own output and returned errors.
	ctrllog.SetLogger(logr.Discard())
	// Interrupting stops waits cleanly; every command can be run again.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
