// Command peerlink is the command-line interface of peerlink: it generates the
// manifests two administrators exchange, renders gateway templates offline,
// manages peer bundles for GitOps, and connects two clusters in one command.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
