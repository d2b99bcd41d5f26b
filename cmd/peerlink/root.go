package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/internal/version"
	"github.com/peerlink/peerlink/templates"
)

// globalOptions are the flags every command shares, kubectl style.
type globalOptions struct {
	// Kubeconfig and Context select the (local) cluster; an empty Kubeconfig
	// follows KUBECONFIG and ~/.kube/config.
	Kubeconfig, Context string
	// Namespace is where objects go or are read; empty: the command's default.
	Namespace string
	// PeerlinkNamespace is where the controller publishes the cluster facts.
	PeerlinkNamespace string

	// build is this command's version, compared with the controller's.
	build version.Info
	// stderr takes warnings.
	stderr io.Writer
}

func (g *globalOptions) local() clusterFlags {
	return clusterFlags{kubeconfig: g.Kubeconfig, context: g.Context, kubeconfigFlag: "--kubeconfig"}
}

// newRootCmd builds the peerlink command tree. Each subcommand lives in its
// own file and is added here.
func newRootCmd() *cobra.Command {
	g := &globalOptions{build: version.Get()}
	root := &cobra.Command{
		Use:   "peerlink",
		Short: "Connect the pod networks of independent Kubernetes clusters",
		Long: `peerlink connects the pod networks of independent Kubernetes clusters over
WireGuard, with the networking.liqo.io/v1beta1 network-peering API.

Install it in each cluster with ` + "`peerlink install`" + ` (or kubectl apply -k bundles/install).

Three ways to peer two clusters:
  - one command, with both kubeconfigs:  peerlink network connect
  - two admins exchanging manifests:     peerlink generate / create ... -o yaml
  - GitOps peer bundles:                 peerlink bundle init|export|add, lint, render`,
		Example: `  # Peer this cluster (client) with another one (server)
  peerlink network connect --kubeconfig a.kubeconfig --remote-kubeconfig b.kubeconfig

  # What this cluster tells its peers about itself
  peerlink info`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			g.stderr = cmd.ErrOrStderr()
		},
	}
	flags := root.PersistentFlags()
	flags.StringVar(&g.Kubeconfig, "kubeconfig", "", "path of the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	flags.StringVar(&g.Context, "context", "", "kubeconfig context to use (default: the current context)")
	flags.StringVarP(&g.Namespace, "namespace", "n", "", "namespace of the objects (default: liqo-tenant-<remote cluster id>)")
	flags.StringVar(&g.PeerlinkNamespace, "peerlink-namespace", templates.InstallNamespace,
		"namespace of the peerlink controller and its "+clusterinfo.Name+" ConfigMap")

	root.AddCommand(
		newCreateCmd(g),
		newGenerateCmd(g),
		newInfoCmd(g),
		newInstallCmd(g),
		newExportCmd(g),
		newUnexportCmd(g),
		newNetworkCmd(g),
		newRotateKeyCmd(g),
		newBundleCmd(g),
		newLintCmd(),
		newRenderCmd(),
		newCompletionCmd(),
		newVersionCmd(g),
	)
	// The completion command above has examples like every other command.
	root.CompletionOptions.DisableDefaultCmd = true
	return root
}

// run executes the command line and returns the process exit code. An error
// is printed as one line on stderr, so scripts can show it as is.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "error:", strings.Join(strings.Fields(err.Error()), " "))
		return 1
	}
	return 0
}
