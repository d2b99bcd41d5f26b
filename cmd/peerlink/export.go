package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/peerlink/peerlink/peering"
)

// parseServiceRef reads NAMESPACE/NAME.
func parseServiceRef(arg string) (ns, name string, err error) {
	ns, name, ok := strings.Cut(arg, "/")
	if !ok {
		return "", "", fmt.Errorf("service %q: give it as NAMESPACE/NAME", arg)
	}
	for _, part := range []string{ns, name} {
		if msgs := validation.IsDNS1123Label(part); len(msgs) > 0 {
			return "", "", fmt.Errorf("service %q: %q: %s", arg, part, strings.Join(msgs, "; "))
		}
	}
	return ns, name, nil
}

func newExportCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "export",
		Short:   "Export a Service to every peer (Multi-Cluster Services API)",
		Example: `  peerlink export service default/echo --wait`,
	}
	var output string
	var wait bool
	var timeout time.Duration
	svc := &cobra.Command{
		Use:   "service NAMESPACE/NAME",
		Short: "Export a Service: apply its ServiceExport, or print it with -o",
		Long: `Export the Service NAMESPACE/NAME to every peer of this cluster: a ServiceExport
of the same name, which the controller sends to the peers through the tunnels.
A peer imports it in the namespace of the same name, where its admin allows
imports, as <name>.<namespace>.svc.clusterset.local.

With -o yaml|json the ServiceExport is printed, to commit in a bundle, and
nothing else happens.`,
		Example: `  peerlink export service default/echo --wait
  peerlink export service default/echo -o yaml > peers/serviceexport-echo.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, err := parseServiceRef(args[0])
			if err != nil {
				return err
			}
			se := &mcsv1beta1.ServiceExport{
				TypeMeta:   metav1.TypeMeta{APIVersion: mcsv1beta1.GroupVersion.String(), Kind: "ServiceExport"},
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			}
			if output != "" {
				return printObjects(cmd.OutOrStdout(), output, se)
			}
			c, err := g.local().client()
			if err != nil {
				return err
			}
			if err := peering.Apply(cmd.Context(), c, se); err != nil {
				return err
			}
			p := peering.Progress{Out: cmd.OutOrStdout(), Timeout: timeout}
			p.Infof("ServiceExport %s/%s applied", ns, name)
			if !wait {
				return nil
			}
			return waitExported(cmd.Context(), c, p, ns, name)
		},
	}
	addOutputFlag(svc, &output, "")
	svc.Flags().BoolVar(&wait, "wait", false, "wait until the controller reports the export Ready")
	svc.Flags().DurationVar(&timeout, "timeout", defaultTimeout, "how long the wait lasts before giving up")
	cmd.AddCommand(svc)
	return cmd
}

// waitExported waits until the ServiceExport is Valid and Ready, and says
// whether it conflicts with other clusters' exports.
func waitExported(ctx context.Context, c client.Client, p peering.Progress, ns, name string) error {
	state, err := p.Wait(ctx, "ServiceExport "+ns+"/"+name+" to be exported", func(ctx context.Context) (bool, string, error) {
		var se mcsv1beta1.ServiceExport
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &se); err != nil {
			return false, "", err
		}
		valid := meta.FindStatusCondition(se.Status.Conditions, string(mcsv1beta1.ServiceExportConditionValid))
		if valid != nil && valid.Status == metav1.ConditionFalse {
			return false, "", fmt.Errorf("ServiceExport %s/%s is not valid: %s: %s", ns, name, valid.Reason, valid.Message)
		}
		ready := meta.FindStatusCondition(se.Status.Conditions, string(mcsv1beta1.ServiceExportConditionReady))
		if ready == nil || ready.Status != metav1.ConditionTrue {
			return false, "not exported yet", nil
		}
		if conflict := meta.FindStatusCondition(se.Status.Conditions, string(mcsv1beta1.ServiceExportConditionConflict)); conflict != nil && conflict.Status == metav1.ConditionTrue {
			return true, "exported, in conflict: " + conflict.Reason + ": " + conflict.Message, nil
		}
		return true, "exported", nil
	})
	if err != nil {
		return err
	}
	p.Infof("ServiceExport %s/%s %s", ns, name, state)
	return nil
}

func newUnexportCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "unexport",
		Short:   "Stop exporting a Service to the peers",
		Example: `  peerlink unexport service default/echo`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:     "service NAMESPACE/NAME",
		Short:   "Delete the ServiceExport of a Service: the peers drop their import of it",
		Example: `  peerlink unexport service default/echo`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, err := parseServiceRef(args[0])
			if err != nil {
				return err
			}
			c, err := g.local().client()
			if err != nil {
				return err
			}
			return unexport(cmd.Context(), c, cmd.OutOrStdout(), ns, name)
		},
	})
	return cmd
}

func unexport(ctx context.Context, c client.Client, out io.Writer, ns, name string) error {
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := c.Delete(ctx, se); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("service %s/%s is not exported (no ServiceExport)", ns, name)
		}
		return fmt.Errorf("delete ServiceExport %s/%s: %w", ns, name, err)
	}
	peering.Progress{Out: out}.Infof("ServiceExport %s/%s deleted: the peers drop their import", ns, name)
	return nil
}
