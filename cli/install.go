package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/peerlink/peerlink/installer"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/templates"
)

// installOptions are the flags of `peerlink install`.
type installOptions struct {
	g           *globalOptions
	clusterID   string
	podCIDRs    []string
	serviceCIDR string
	reserved    []string
	output      outputFlag
	timeout     time.Duration
}

func newInstallCmd(g *globalOptions) *cobra.Command {
	o := &installOptions{g: g}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install peerlink into a cluster and wait until it runs",
		Long: `Install peerlink into the cluster of --kubeconfig/--context, from the install
bundle built into this binary (bundles/install): the CRDs first, waited for
until the API server serves them, then the controller, the fabric DaemonSet,
their RBAC and the admission policy, applied server-side under the field
manager peerlink-cli. It then waits until the controller and the fabric agent
of every node run and the controller has published the cluster's facts, and
prints them with where each comes from.

Facts not given are detected by the controller: the cluster ID from the
kube-system namespace UID, the pod CIDRs from the Nodes' spec.podCIDRs, the
service CIDR from the API server. Given facts always win.

Running it again applies the bundle again (an upgrade, or new facts).`,
		Example: `  # Install with every fact detected
  peerlink install --kubeconfig a.kubeconfig

  # Give the cluster ID and the pod range, and see what would be applied
  peerlink install --cluster-id cluster-a --pod-cidr 10.244.0.0/16 --dry-run -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dryRun, _ := cmd.Flags().GetBool("dry-run")
			return o.run(cmd, dryRun)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.clusterID, "cluster-id", "", "ID peers know this cluster by (default: detected from the kube-system namespace UID)")
	f.StringSliceVar(&o.podCIDRs, "pod-cidr", nil, "pod CIDR of this cluster, repeatable (default: detected from the Nodes' spec.podCIDRs)")
	f.StringVar(&o.serviceCIDR, "service-cidr", "", "service CIDR of this cluster (default: detected from the API server)")
	f.StringSliceVar(&o.reserved, "reserved-cidr", nil, "further CIDR in use in this cluster (node network, load balancers), never given to a peer, repeatable")
	f.Bool("dry-run", false, "print what would be applied (with -o) and change nothing")
	o.output.addWithUsage(cmd, "yaml", "format of --dry-run: yaml or json")
	f.DurationVar(&o.timeout, "timeout", defaultTimeout, "how long each wait lasts before giving up")
	return cmd
}

// facts checks the fact flags.
func (o *installOptions) facts() (installer.Facts, error) {
	var f installer.Facts
	var err error
	f.ClusterID = o.clusterID
	if f.PodCIDRs, err = manifests.ParseCIDRList(o.podCIDRs...); err != nil {
		return f, fmt.Errorf("--pod-cidr: %w", err)
	}
	if o.serviceCIDR != "" {
		if f.ServiceCIDR, err = cidr.ParseNetwork(o.serviceCIDR); err != nil {
			return f, fmt.Errorf("--service-cidr: %w", err)
		}
	}
	if f.ReservedCIDRs, err = manifests.ParseCIDRList(o.reserved...); err != nil {
		return f, fmt.Errorf("--reserved-cidr: %w", err)
	}
	return f, f.Validate()
}

func (o *installOptions) run(cmd *cobra.Command, dryRun bool) error {
	if o.g.namespace() != "" || o.g.PeerlinkNamespace != templates.InstallNamespace {
		return errors.New("--namespace, --peerlink-namespace: the install bundle puts peerlink in namespace " + templates.InstallNamespace)
	}
	f, err := o.facts()
	if err != nil {
		return err
	}
	objs, err := installer.Objects(f)
	if err != nil {
		return err
	}
	if dryRun {
		list := make([]runtime.Object, len(objs))
		for i, obj := range objs {
			list[i] = obj
		}
		return o.output.print(cmd, list...)
	}
	c, err := o.g.local().client()
	if err != nil {
		return err
	}
	ctx, p := cmd.Context(), progress(cmd.OutOrStdout(), o.timeout)
	if err := installer.Apply(ctx, c, objs, p); err != nil {
		return err
	}
	info, err := installer.WaitReady(ctx, c, p)
	if err != nil {
		return err
	}
	for _, line := range installer.Summary(info) {
		p.Infof("%s", line)
	}
	p.Infof("peerlink is installed: peer this cluster with `peerlink network connect` or a peer bundle (`peerlink bundle init`)")
	return nil
}
