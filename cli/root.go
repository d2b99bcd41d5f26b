package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/internal/version"
	"github.com/peerlink/peerlink/peering"
	"github.com/peerlink/peerlink/templates"
)

// globalOptions are the flags every command shares, kubectl style.
type globalOptions struct {
	// kube selects the (local) cluster with kubectl's flags: --kubeconfig
	// (empty: KUBECONFIG, else ~/.kube/config), --context, --as, --token,
	// --server, --request-timeout... and holds -n.
	kube *genericclioptions.ConfigFlags
	// PeerlinkNamespace is where the controller publishes the cluster facts.
	PeerlinkNamespace string

	// build is this command's version, compared with the controller's.
	build version.Info
	// stderr takes warnings.
	stderr io.Writer
}

func (g *globalOptions) local() cluster {
	return cluster{flags: g.kube, kubeconfigFlag: "--kubeconfig"}
}

// namespace is where objects go or are read, as -n gives it; empty: the
// command's default, never the namespace of the kubeconfig's context.
func (g *globalOptions) namespace() string {
	return *g.kube.Namespace
}

// newRootCmd builds the peerlink command tree. Each subcommand lives in its
// own file and is added here.
func newRootCmd() *cobra.Command {
	g := &globalOptions{build: version.Get(), kube: genericclioptions.NewConfigFlags(true)}
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
	// The CLI uses no discovery cache: its client finds its kinds in its
	// own scheme.
	g.kube.CacheDir = nil
	g.kube.AddFlags(flags)
	for name, usage := range map[string]string{
		"kubeconfig": "path of the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)",
		"context":    "kubeconfig context to use (default: the current context)",
		"namespace":  "namespace of the objects (default: liqo-tenant-<remote cluster id>)",
	} {
		flags.Lookup(name).Usage = usage
	}
	flags.StringVar(&g.PeerlinkNamespace, "peerlink-namespace", templates.InstallNamespace,
		"namespace of the peerlink controller and its "+clusterinfo.Name+" ConfigMap")

	root.AddCommand(
		newCreateCmd(g),
		newGenerateCmd(g),
		newInfoCmd(g),
		newDiagnoseCmd(g),
		newVerifyCmd(g),
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

// Run executes the command line and returns the process exit code. An error
// is printed as one line on stderr, so scripts can show it as is.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		msg := err.Error()
		if errors.Is(err, peering.ErrNotInstalled) {
			msg += " (--peerlink-namespace)"
		}
		fmt.Fprintln(stderr, "error:", strings.Join(strings.Fields(msg), " "))
		return 1
	}
	return 0
}
