package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/peerbundle"
)

// renderOptions are the flags of peerlink render.
type renderOptions struct {
	files  []string
	output outputFlag
	facts  peerFactFlags
	peerbundle.RenderOverrides
}

func newRenderCmd() *cobra.Command {
	var o renderOptions
	cmd := &cobra.Command{
		Use:   "render (DIR | -f FILE [-f FILE ...])",
		Short: "Print the gateway object the controller renders from a GatewayServer or GatewayClient",
		Long: `Render, offline, the template each GatewayServer and GatewayClient in the
files references, and print the WgGatewayServer or WgGatewayClient the
controller will create from it, so a reviewer sees it before it is applied.

Files hold YAML or JSON documents (several per file, separated by ---), or
are - for standard input. Gateways are rendered with the CRD defaults
applied (mtu 1340, port 51840, serviceType ClusterIP, protocol UDP).
The template of a gateway is looked up among the files by kind, name and
namespace (a template without a namespace matches any); when the files have
none, the default template it references (wireguard-server,
wireguard-client) is used. Other objects in the files are ignored.

Template variables come from each gateway: .GatewayUID from metadata.uid
(else ` + peerbundle.PlaceholderUID + `), .ClusterID from the
liqo.io/remote-cluster-id label, .SecretName from spec.secretRef.name (else
gw-<name>). A gateway without a namespace is rendered in "default".

With DIR, a peer bundle (a kustomize directory) is built and its gateways
rendered with the bundle's own templates, else the defaults. With
--cluster-info FILE (a saved cluster-info ConfigMap, or the output of
peerlink info -o yaml) each Configuration of the bundle is printed too, with
the status.remote the controller would write: where the peer's ranges land in
this cluster, as long as no other peer holds ranges yet.

` + peerFactsHelp + `

Render shows the placements as the status.remote of each Configuration, and
so takes --allowed-peer-cidr and --routed-peer-cidr only with --cluster-info,
which gives this cluster's ranges.

A bundle is built from local files only: a remote resource, base, component
or file (a URL, a git repository) is refused before anything is fetched.`,
		Example: `  # What the controller will create for a GatewayServer, with the default template
  peerlink render -f gatewayserver.yaml

  # With a custom template, from standard input, as JSON
  cat gatewayclient.yaml my-template.yaml | peerlink render -f - -o json

  # What the controller will create for a peer bundle, and the remapping
  peerlink info -o yaml > cluster-a.yaml
  peerlink render peers/cluster-b --cluster-info cluster-a.yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, args)
		},
	}
	flags := cmd.Flags()
	flags.StringArrayVarP(&o.files, "filename", "f", nil, "file with gateways and templates, or - for standard input (repeatable)")
	o.output.addWithUsage(cmd, string(manifests.FormatYAML), "output format: yaml or json")
	flags.StringVar(&o.UID, "uid", "", "the gateway UID to render with (default: metadata.uid, else "+peerbundle.PlaceholderUID+")")
	flags.StringVar(&o.SecretName, "secret-name", "", "the key Secret name to render with (default: spec.secretRef.name, else gw-<name>)")
	flags.StringVar(&o.ClusterID, "cluster-id", "", "the remote cluster ID to render with (default: the liqo.io/remote-cluster-id label)")
	o.facts.register(cmd)
	return cmd
}

// run renders a bundle DIR or the files, and prints. Nothing is printed
// unless every gateway renders.
func (o *renderOptions) run(cmd *cobra.Command, args []string) error {
	if _, err := o.output.check(); err != nil {
		return err
	}
	var docs []map[string]any
	var err error
	switch {
	case len(args) == 1 && len(o.files) > 0:
		return errors.New("give either DIR or -f, not both")
	case len(args) == 1:
		facts, _, err := o.facts.load()
		if err != nil {
			return err
		}
		if flag := o.facts.given(); flag != "" && facts.Info == nil {
			// Without this cluster's ranges no Configuration is rendered,
			// and the flag would change nothing.
			return fmt.Errorf("%s: only with --cluster-info, which gives this cluster's ranges", flag)
		}
		docs, err = peerbundle.RenderBundle(args[0], facts.Info)
		if err != nil {
			return err
		}
	case len(o.files) == 0:
		return errors.New("a bundle DIR or -f FILE is required")
	case o.facts.given() != "":
		return fmt.Errorf("%s: only with a bundle DIR", o.facts.given())
	default:
		if docs, err = peerbundle.RenderFiles(o.files, cmd.InOrStdin(), o.RenderOverrides); err != nil {
			return err
		}
	}
	return o.output.printManifests(cmd.OutOrStdout(), docs...)
}
