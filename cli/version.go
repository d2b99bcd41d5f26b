package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/internal/version"
)

func newVersionCmd(g *globalOptions) *cobra.Command {
	var f documentFlags
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this command and of the cluster's peerlink controller",
		Long: `Print the version, commit and Go version of this command and, unless --client
is given, the version the cluster's controller publishes in its ` + clusterinfo.Name + `
ConfigMap. When the two differ, a warning on stderr says so; every command that
reads a cluster warns the same way.`,
		Example: `  peerlink version
  peerlink version --client -o json
  peerlink version --get controllerVersion.version`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := version.Report{Client: g.build}
			var readErr error
			if !clientOnly {
				var cv string
				if cv, readErr = g.controllerVersion(cmd.Context()); readErr == nil {
					v.Controller = &version.ControllerVersion{Version: cv}
					g.warnSkew(cv, "")
				}
			}
			// As kubectl does, the client's version is printed also when
			// the cluster cannot be read.
			summary := func(w io.Writer) { v.WriteSummary(w, clusterinfo.Name+" ConfigMap") }
			if err := f.print(cmd.OutOrStdout(), v, summary); err != nil {
				return err
			}
			return readErr
		},
	}
	f.addFlags(cmd)
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print this command's version only, without reading the cluster")
	return cmd
}

// controllerVersion reads the version the controller of the cluster of the
// global flags publishes.
func (g *globalOptions) controllerVersion(ctx context.Context) (string, error) {
	cl, err := g.local().client()
	if err != nil {
		return "", err
	}
	cv, err := clusterinfo.ReadControllerVersion(ctx, cl, g.PeerlinkNamespace)
	if err != nil {
		return "", fmt.Errorf("controller version: %w", err)
	}
	return cv, nil
}

// localClient builds a client of the cluster of the global flags and
// checks the version of its controller (checkVersion).
func (g *globalOptions) localClient(ctx context.Context) (client.Client, error) {
	cl, err := g.local().client()
	if err != nil {
		return nil, err
	}
	g.checkVersion(ctx, cl, "")
	return cl, nil
}

// checkVersion warns on stderr when the controller of the cluster that c
// reaches runs another version than this command; cluster names the cluster in the
// warning when the command reads two. It costs one read, of the ConfigMap
// most commands read anyway; a failed read is left to the command, which
// fails on it with a better message, or does not need the controller.
func (g *globalOptions) checkVersion(ctx context.Context, c client.Reader, cluster string) {
	cv, err := clusterinfo.ReadControllerVersion(ctx, c, g.PeerlinkNamespace)
	if err == nil {
		g.warnSkew(cv, cluster)
	}
}

// warnSkew prints the warning of a controller version that differs from
// this command's.
func (g *globalOptions) warnSkew(controller, cluster string) {
	skew := g.build.Skew(controller)
	if skew == "" {
		return
	}
	if cluster != "" {
		skew = cluster + " cluster: " + skew
	}
	fmt.Fprintln(g.stderr, "warning:", skew)
}
